"""Drives a sans-IO :class:`Group` the way the coordinator does, with a manual clock."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.groups.group import Group
from tabletopic.broker.groups.model import (
    Action,
    CancelTimer,
    GroupConfig,
    GroupSnapshot,
    JoinRequest,
    JoinResult,
    MemberIdentity,
    Persist,
    Protocols,
    Respond,
    SetTimer,
    SyncRequest,
    SyncResult,
    TimerKey,
)

RANGE: Protocols = (("range", b"range-meta"),)

FAST = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1)


def join_request(
    member_id: str = "",
    protocols: Protocols = RANGE,
    *,
    instance: str | None = None,
    client_id: str = "c",
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
    v4: bool = True,
    v9: bool = False,
    protocol_type: str = "consumer",
) -> JoinRequest:
    """A JoinGroup of group ``g`` from loopback; ``v4``: the member must rejoin with the id it is
    given (JoinGroup v4+), ``v9``: it may skip the assignment (v9+)."""
    return JoinRequest(
        group_id="g",
        member_id=member_id,
        group_instance_id=instance,
        client_id=client_id,
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=protocol_type,
        protocols=protocols,
        require_known_member_id=v4,
        supports_skip_assignment=v9,
    )


@dataclass
class Driver:
    config: GroupConfig = FAST
    now: int = 0
    timers: dict[TimerKey, int] = field(default_factory=dict)
    results: dict[int, JoinResult | SyncResult] = field(default_factory=dict)
    persisted: list[GroupSnapshot | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        ids = itertools.count(1)
        self.group = Group("g", self.config, new_member_id=lambda prefix: f"{prefix}-{next(ids)}")
        self._tickets = itertools.count(1)

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, SetTimer):
                self.timers[action.key] = self.now + action.delay_ms
            elif isinstance(action, CancelTimer):
                self.timers.pop(action.key, None)
            elif isinstance(action, Respond):
                assert action.ticket not in self.results, f"ticket {action.ticket} answered twice"
                self.results[action.ticket] = action.result
            elif isinstance(action, Persist):
                self.persisted.append(action.snapshot)

    # Requests ----------------------------------------------------------------------------------

    def join(self, member_id: str = "", protocols: Protocols = RANGE, **options: Any) -> int:
        """Send :func:`join_request` (``options`` are its keyword arguments); returns the ticket."""
        ticket = next(self._tickets)
        self.apply(self.group.join(join_request(member_id, protocols, **options), ticket))
        return ticket

    def join_new(self, client_id: str = "c", **kwargs: object) -> tuple[str, int]:
        """The two-phase join of a v4+ dynamic member: returns its id and the second join's ticket."""
        first = self.join(client_id=client_id, **kwargs)  # type: ignore[arg-type]
        result = self.results.pop(first)
        assert isinstance(result, JoinResult) and result.error is ErrorCode.member_id_required
        return result.member_id, self.join(result.member_id, client_id=client_id, **kwargs)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> int:
        ticket = next(self._tickets)
        request = SyncRequest("g", member_id, instance, generation, "consumer", None, assignments or {})
        self.apply(self.group.sync(request, ticket))
        return ticket

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        error, actions = self.group.heartbeat(member_id, instance, generation)
        self.apply(actions)
        return error

    def leave(self, *identities: MemberIdentity) -> list[ErrorCode]:
        errors, actions = self.group.leave(identities)
        self.apply(actions)
        return errors

    # Results -----------------------------------------------------------------------------------

    def joined(self, ticket: int) -> JoinResult:
        result = self.results.pop(ticket)
        assert isinstance(result, JoinResult), result
        return result

    def synced(self, ticket: int) -> SyncResult:
        result = self.results.pop(ticket)
        assert isinstance(result, SyncResult), result
        return result

    def pending(self, ticket: int) -> bool:
        return ticket not in self.results

    # Time --------------------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers in deadline order (a fired timer may arm others)."""
        target = self.now + ms
        while True:
            due = [(deadline, key) for key, deadline in self.timers.items() if deadline <= target]
            if not due:
                break
            deadline, key = min(due, key=lambda item: item[0])
            del self.timers[key]
            self.now = deadline
            self.apply(self.group.on_timer(key))
        self.now = target

    # Scenarios ---------------------------------------------------------------------------------

    def stable_group(self, *clients: str, protocols: Protocols = RANGE) -> tuple[list[str], int]:
        """Members joined one by one into a Stable group; returns their ids and the generation.
        Each member's assignment is ``b"assignment-of-<member id>"``."""
        ids: list[str] = []
        for client in clients:
            member_id, ticket = self.join_new(client, protocols=protocols)
            tickets = {member_id: ticket}
            for other in ids:
                tickets[other] = self.join(other, client_id=other, protocols=protocols)
            ids.append(member_id)
            results = {m: self.joined(t) for m, t in tickets.items()}
            generation = results[member_id].generation_id
            leader = results[member_id].leader_id
            syncs = {m: self.sync(m, generation) for m in ids if m != leader}
            syncs[leader] = self.sync(leader, generation, {m: f"assignment-of-{m}".encode() for m in ids})
            for ticket in syncs.values():
                assert self.synced(ticket).error is ErrorCode.none
        return ids, self.group.generation_id
