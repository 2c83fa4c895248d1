"""The asyncio driver of KIP-848 consumer groups (:mod:`tabletopic.broker.groups.consumer_group`):
it keeps the groups of this coordinator, feeds them heartbeats with the current topics, and turns
their timer actions into event-loop timers. Everything that decides lives in the pure module.

What is durable, through the classic coordinator's store and fenced like every group write in a
cluster: committed offsets, and each group's members, epochs, subscriptions and assignments
(:mod:`tabletopic.broker.groups.consumer_records`), written after each heartbeat or timer that
changed them. So a restart or a coordinator failover keeps the members where they were: they
heartbeat to the new coordinator with their epochs and keep their partitions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from kio.schema.errors import ErrorCode

from tabletopic.broker.groups import subscription
from tabletopic.broker.groups.assignors import TopicPartition, assignor_name
from tabletopic.broker.groups.consumer_group import (
    LEAVE_EPOCH,
    Action,
    CancelTimer,
    ConsumerGroup,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    SetTimer,
    TimerKind,
    check_regex,
)
from tabletopic.broker.groups.consumer_records import restored_group
from tabletopic.broker.groups.model import (
    CONSUMER_PROTOCOL_TYPE,
    JoinRequest,
    JoinResult,
    MemberIdentity,
    SyncRequest,
    SyncResult,
)
from tabletopic.broker.groups.settings import GroupSettings

log = logging.getLogger(__name__)

TopicIds = Mapping[str, tuple[uuid.UUID, int]]
"""topic name -> (topic id, partition count) of every topic of the cluster."""

ClassicHandover = tuple[int, list[ConsumerMember]] | str | None
"""A classic group handed over for an upgrade: its generation and its members as classic members of
a consumer group; or why it cannot be (a phrase); or None when there is no classic group with
members."""


class ConsumerGroups:
    """The consumer-type groups of one group coordinator.

    Args:
        settings: ``group.consumer.*`` settings.
        refusal: the classic coordinator's check of a group id (loading, not coordinated here).
        upgrade_classic: hands over the classic group of that id for an upgrade (a group id is one
            type): its generation and members, or why it cannot be upgraded, or None when no
            classic group of that id has members.
        topics: the cluster's topics now (names, ids, partition counts).
    """

    def __init__(
        self,
        settings: GroupSettings,
        refusal: Callable[[str], ErrorCode | None],
        upgrade_classic: Callable[[str], ClassicHandover],
        topics: Callable[[], TopicIds] = dict,
    ) -> None:
        self.settings = settings
        self.topics = topics
        # The rack of each partition of the topics given (its leader's), for rack-aware assignment.
        self.partition_racks: Callable[[Mapping[str, int]], Mapping[TopicPartition, str]] = lambda _topics: {}
        self.refusal = refusal
        self._upgrade_classic = upgrade_classic
        # Whether a group id is a share group's (set by the coordinator that holds both).
        self.is_share_group: Callable[[str], bool] = lambda group_id: False
        # Called with a group id whose state changed, to write it (set by the coordinator that
        # holds the store); the write is queued, the answer does not wait for it.
        self.persist: Callable[[str], None] = lambda group_id: None
        self._groups: dict[str, ConsumerGroup] = {}
        self._timers: dict[tuple[str, TimerKind, str], asyncio.TimerHandle] = {}

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ConsumerGroup]:
        return list(self._groups.values())

    def heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat (answered at once: KIP-848 never holds a request back)."""

        def refuse(error: ErrorCode, message: str | None = None) -> HeartbeatResult:
            return HeartbeatResult(error, request.member_id, request.member_epoch, message=message)

        if (refused := self.refusal(group_id)) is not None:
            return refuse(refused)
        if not group_id:
            return refuse(ErrorCode.invalid_group_id, "the group id must not be empty")
        if request.server_assignor is not None:
            name = assignor_name(request.server_assignor)
            if name is None or name not in self.settings.assignors:
                served = ", ".join(self.settings.assignors)
                return refuse(
                    ErrorCode.unsupported_assignor,
                    f"assignor {request.server_assignor!r} is not one of group.consumer.assignors ({served})",
                )
            request = replace(request, server_assignor=name)
        regex = request.subscribed_topic_regex
        if regex and (problem := check_regex(regex)) is not None:
            return refuse(ErrorCode.invalid_regular_expression, problem)
        group = self._groups.get(group_id)
        if group is None and self.is_share_group(group_id):
            return refuse(ErrorCode.group_id_not_found, f"group {group_id} is a share group")
        if (group is None or not group.members) and request.member_epoch == 0:
            # An id is one group: a classic group with members becomes this consumer group, its
            # members staying as classic members, or the joining member is refused.
            classic = self._upgrade_classic(group_id)
            if isinstance(classic, str):
                return refuse(ErrorCode.group_id_not_found, f"classic group {group_id} {classic}")
            if classic is not None:
                epoch, members = classic
                group, actions = ConsumerGroup.upgraded(
                    group_id, self.settings, epoch, members, self._racks_of
                )
                self._groups[group_id] = group
                self._apply(group_id, actions)
                self.persist(group_id)
                log.info(
                    "group %s upgraded from classic to consumer at epoch %d with its %d member(s)",
                    group_id,
                    epoch,
                    len(members),
                )
        if group is None:
            if request.member_epoch != 0:
                return refuse(ErrorCode.unknown_member_id)
            group = self._groups[group_id] = ConsumerGroup(
                group_id, self.settings, partition_racks=self._racks_of
            )
        counts = {name: count for name, (_, count) in self.topics().items()}
        before = (group.group_epoch, len(group.members))
        stored = _stored_part(group, request.member_id)
        result, actions = group.heartbeat(request, counts)
        self._apply(group_id, actions)
        if _stored_part(group, request.member_id) != stored:
            self.persist(group_id)
        if (group.group_epoch, len(group.members)) != before:
            log.info(
                "consumer group %s: epoch %d, %d members, state %s",
                group_id,
                group.group_epoch,
                len(group.members),
                group.state,
            )
        return result

    def _racks_of(self, topics: Mapping[str, int]) -> Mapping[TopicPartition, str]:
        """What groups are given: it reads ``partition_racks`` when called, so groups made before
        the broker sets it still see the leaders' racks."""
        return self.partition_racks(topics)

    # -----------------------------------------------------------------------------------------
    # Classic members of a consumer group (Kafka 4's mixed groups, the downgrade direction): a
    # JoinGroup/SyncGroup/Heartbeat/LeaveGroup client in a group that has consumer members. Its
    # JoinGroup is a heartbeat (subscription and owned partitions read from its metadata), SyncGroup
    # hands it the broker's assignment, Heartbeat says REBALANCE_IN_PROGRESS until it has its target.

    def serves_classic(self, group_id: str) -> bool:
        """Whether classic requests for ``group_id`` go to its consumer group (it has members)."""
        group = self._groups.get(group_id)
        return group is not None and bool(group.members)

    def classic_join(self, request: JoinRequest, new_member_id: Callable[[str], str]) -> JoinResult:
        group = self._groups[request.group_id]
        if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not request.protocols:
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        protocol, metadata = request.protocols[0]
        topics = subscription.topics(metadata)
        if topics is None:
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        member_id = request.member_id
        if not member_id:
            member_id = new_member_id(request.client_id)
            if request.require_known_member_id:
                return JoinResult(ErrorCode.member_id_required, member_id)
        existing = group.members.get(member_id)
        heartbeat = HeartbeatRequest(
            member_id,
            0 if existing is None else existing.member_epoch,
            instance_id=request.group_instance_id if existing is None else None,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(topics)),
            owned=subscription.owned_partitions(metadata),
            client_id=request.client_id,
            client_host=request.client_host,
            session_timeout_ms=request.session_timeout_ms,
            classic_protocol=protocol,
        )
        result = self.heartbeat(request.group_id, heartbeat)
        member = group.members.get(member_id)
        if result.error is ErrorCode.none and member is not None and member.pending_revocation:
            # Put into revocation by this very join, whose metadata already says what it owns.
            result = self.heartbeat(request.group_id, replace(heartbeat, member_epoch=member.member_epoch))
        if result.error is not ErrorCode.none:
            return JoinResult(result.error, member_id)
        return JoinResult(
            ErrorCode.none,
            member_id,
            generation_id=result.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocol,
            leader_id="",  # nobody runs a client-side assignor: the broker assigned already
        )

    def classic_sync(self, request: SyncRequest) -> SyncResult:
        group = self._groups[request.group_id]
        member = group.members.get(request.member_id)
        if member is None or member.classic_protocol is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if request.generation_id != member.member_epoch:
            return SyncResult(ErrorCode.illegal_generation)
        assignment = subscription.encode_assignment(member.assigned)
        return SyncResult(ErrorCode.none, CONSUMER_PROTOCOL_TYPE, member.classic_protocol, assignment)

    def classic_heartbeat(self, group_id: str, member_id: str, generation: int) -> ErrorCode:
        error, actions = self._groups[group_id].classic_heartbeat(member_id, generation)
        self._apply(group_id, actions)
        return error

    def classic_leave(self, group_id: str, identities: Sequence[MemberIdentity]) -> list[ErrorCode]:
        return [
            self.heartbeat(group_id, HeartbeatRequest(i.member_id, LEAVE_EPOCH)).error for i in identities
        ]

    def restore(self, group_id: str, record: str) -> None:
        """Take over a stored group (this coordinator now serves it), arming its members' timers;
        an unreadable record is logged and skipped (its members rejoin, as without one)."""
        try:
            group, actions = restored_group(group_id, record, self.settings, self._racks_of)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            log.warning("consumer group %s: stored state unreadable (%s), its members rejoin", group_id, exc)
            return
        self.unload(lambda g: g == group_id)
        self._groups[group_id] = group
        self._apply(group_id, actions)

    def unload(self, accept: Callable[[str], bool]) -> None:
        """Forget the groups ``accept`` selects (another broker coordinates them now)."""
        for group_id in [g for g in self._groups if accept(g)]:
            del self._groups[group_id]
            for key in [k for k in self._timers if k[0] == group_id]:
                self._timers.pop(key).cancel()

    def stop(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def _apply(self, group_id: str, actions: list[Action]) -> None:
        loop = asyncio.get_running_loop()
        for action in actions:
            key = (group_id, action.kind, action.member_id)
            old = self._timers.pop(key, None)
            if old is not None:
                old.cancel()
            if isinstance(action, SetTimer):
                self._timers[key] = loop.call_later(max(action.delay_ms, 0) / 1000, self._on_timer, key)
            else:
                assert isinstance(action, CancelTimer)

    def _on_timer(self, key: tuple[str, TimerKind, str]) -> None:
        self._timers.pop(key, None)
        group_id, kind, member_id = key
        group = self._groups.get(group_id)
        if group is None or self.refusal(group_id) is not None:
            return
        log.info("consumer group %s: member %s fenced (%s timeout)", group_id, member_id, kind.value)
        counts = {name: count for name, (_, count) in self.topics().items()}
        actions = group.on_timer(kind, member_id, counts)
        self._apply(group_id, actions)
        if actions:
            self.persist(group_id)


def _stored_part(group: ConsumerGroup, member_id: str) -> tuple[object, ...]:
    """What a heartbeat of ``member_id`` can change of the stored state: the group's epochs and
    size, and that member (a join, a static member's return or a leave adds or removes it; a
    target computed anew moves the assignment epoch)."""
    member = group.members.get(member_id)
    return (
        group.group_epoch,
        group.assignment_epoch,
        len(group.members),
        None if member is None else tuple(getattr(member, name) for name in _MEMBER_FIELDS),
    )


_MEMBER_FIELDS = tuple(f.name for f in dataclasses.fields(ConsumerMember))
