"""The classic consumer-group membership state machine, sans-IO.

A :class:`Group` takes the requests of its members (join, sync, heartbeat, leave, commit checks) and
timer expirations, changes its state, and returns the :mod:`actions <tabletopic.broker.groups.model>`
its driver must carry out: arm or cancel a timer, persist the membership, complete a held-back
JoinGroup/SyncGroup response. It never sleeps, never reads a clock and never touches a socket or the
database, so every rebalance scenario (eager, cooperative two-round, static members, expirations) is
a plain unit test. Member ids come from an injected factory for the same reason.

The semantics follow Apache Kafka's classic ``GroupCoordinator`` because that is what the clients
were written against: two-phase join (MEMBER_ID_REQUIRED, KIP-394), the leader's assignment
propagated on SyncGroup, REBALANCE_IN_PROGRESS on heartbeats while a rebalance gathers members,
static membership (KIP-345) replacing a restarted member without a rebalance, and
``group.initial.rebalance.delay.ms`` batching a starting fleet into one rebalance.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from kio.schema.errors import ErrorCode

from tabletopic.broker.groups import protocols, views
from tabletopic.broker.groups.model import (
    UNKNOWN_MEMBER_ID,
    Action,
    CancelTimer,
    GroupConfig,
    GroupDescription,
    GroupSnapshot,
    GroupState,
    JoinedMember,
    JoinRequest,
    JoinResult,
    Member,
    MemberIdentity,
    Persist,
    Respond,
    SetTimer,
    SyncRequest,
    SyncResult,
    TimerKey,
    TimerKind,
)
from tabletopic.broker.groups.transitions import check_transition

MemberIdFactory = Callable[[str], str]

JOIN_TIMER = TimerKey(TimerKind.JOIN)
SYNC_TIMER = TimerKey(TimerKind.SYNC)


# The most of a client id or instance id a member id begins with: member ids are part of a stored
# key, and PostgreSQL indexes no key much over 2.7 kB (the uuid keeps ids unique).
MEMBER_ID_PREFIX_CHARS = 255


def random_member_id(prefix: str) -> str:
    """Kafka's scheme, ``<client.id or group.instance.id>-<uuid>``, so ids stay readable in tools."""
    return f"{prefix[:MEMBER_ID_PREFIX_CHARS]}-{uuid.uuid4()}"


def check_join(request: JoinRequest, config: GroupConfig) -> ErrorCode | None:
    """Checks that need no group; ``None`` when the request may go to the group."""
    if not request.group_id:
        return ErrorCode.invalid_group_id
    if not config.min_session_timeout_ms <= request.session_timeout_ms <= config.max_session_timeout_ms:
        return ErrorCode.invalid_session_timeout
    return None


class Group:
    """One classic group. Public methods return the actions to perform, in order."""

    def __init__(
        self,
        group_id: str,
        config: GroupConfig | None = None,
        new_member_id: MemberIdFactory = random_member_id,
    ) -> None:
        self.group_id = group_id
        self.config = config or GroupConfig()
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        # Ids handed out with MEMBER_ID_REQUIRED whose second JoinGroup has not arrived yet.
        self.pending_members: set[str] = set()
        self.static_members: dict[str, str] = {}
        self._new_member_id = new_member_id
        # While the initial delay runs, a complete join waits for the timer (more members may come).
        self._initial_delay = False
        self._initial_remaining_ms = 0
        self._new_member_added = False
        self._out: list[Action] = []

    # ---------------------------------------------------------------------------------------------
    # Requests

    def join(self, request: JoinRequest, ticket: int) -> list[Action]:
        """A JoinGroup; its answer is a :class:`Respond` for ``ticket``, now or later."""
        if self.state is GroupState.DEAD:
            # The group was just deleted: the client looks the coordinator up again and retries.
            self._respond(ticket, JoinResult(ErrorCode.coordinator_not_available, request.member_id))
        elif not self._supports_protocols(request):
            self._respond(ticket, JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id))
        elif request.member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(request, ticket)
        else:
            self._join_known_member(request, ticket)
        self._try_complete_join()
        return self._take()

    def sync(self, request: SyncRequest, ticket: int) -> list[Action]:
        """A SyncGroup; followers wait until the leader's SyncGroup brings the assignment."""
        error = self._check_member(request.member_id, request.group_instance_id, request.generation_id)
        if error is None and (
            (request.protocol_type is not None and request.protocol_type != self.protocol_type)
            or (request.protocol_name is not None and request.protocol_name != self.protocol_name)
        ):
            error = ErrorCode.inconsistent_group_protocol
        if error is None and self.state is GroupState.EMPTY:
            error = ErrorCode.unknown_member_id
        if error is None and self.state is GroupState.PREPARING_REBALANCE:
            error = ErrorCode.rebalance_in_progress
        if error is not None:
            self._respond(ticket, SyncResult(error))
            return self._take()
        member = self.members[request.member_id]
        self._arm_session(member)
        if self.state is GroupState.STABLE:
            self._respond(ticket, self._sync_result(member))
            return self._take()
        # CompletingRebalance.
        if member.sync_ticket is not None and member.sync_ticket != ticket:
            self._respond(member.sync_ticket, SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_ticket = ticket
        if member.member_id == self.leader_id:
            for each in self.members.values():
                each.assignment = request.assignments.get(each.member_id, b"")
            self._transition(GroupState.STABLE)
            self._emit(CancelTimer(SYNC_TIMER))
            # Durable first: answers below wait for this write.
            self._emit(Persist(self.group_id, self.snapshot()))
            for each in self.members.values():
                if each.sync_ticket is not None:
                    self._respond(each.sync_ticket, self._sync_result(each))
                    each.sync_ticket = None
        return self._take()

    def heartbeat(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> tuple[ErrorCode, list[Action]]:
        error = self._check_member(member_id, group_instance_id, generation_id)
        if error is None and self.state is GroupState.EMPTY:
            error = ErrorCode.unknown_member_id
        if error is None:
            self._arm_session(self.members[member_id])
            if self.state is GroupState.PREPARING_REBALANCE:
                error = ErrorCode.rebalance_in_progress
        return error or ErrorCode.none, self._take()

    def leave(self, identities: Sequence[MemberIdentity]) -> tuple[list[ErrorCode], list[Action]]:
        """LeaveGroup of one or (v3+) several members; one error per identity."""
        errors = [self._leave_one(identity) for identity in identities]
        self._try_complete_join()
        return errors, self._take()

    def check_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """May this committer write offsets now? Kafka's rules: members of the current generation
        may (also while the group prepares a rebalance, so an eager consumer can commit before giving
        up its partitions); a "simple" committer (generation -1, no member id) only while the group
        is Empty, so it cannot clobber an active group's progress."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._check_member(member_id, group_instance_id, generation_id)
            if error is not None:
                return error
            if self.state is GroupState.COMPLETING_REBALANCE:
                return ErrorCode.rebalance_in_progress
            return ErrorCode.none
        if self.state is not GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def check_transactional_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """May this member commit offsets with its transaction (TxnOffsetCommit, KIP-447)? Kafka's
        rules: as an OffsetCommit's for a member of the current generation, also while the group
        completes a rebalance (the transaction's outcome decides later); one naming no member (a
        producer from before KIP-447) whatever the group's state."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            return self._check_member(member_id, group_instance_id, generation_id) or ErrorCode.none
        return ErrorCode.none

    def on_timer(self, key: TimerKey) -> list[Action]:
        """A timer armed with :class:`SetTimer` expired."""
        _TIMER_HANDLERS[key.kind](self, key.member_id)
        self._try_complete_join()
        return self._take()

    def _on_session_timeout(self, member_id: str) -> None:
        member = self.members.get(member_id)
        if member is None:
            return
        if member.join_ticket is not None or member.sync_ticket is not None:
            # A member parked in a rebalance cannot heartbeat; the rebalance timeout bounds it.
            self._arm_session(member)
        else:
            self._remove_member_and_update(member, ErrorCode.unknown_member_id)

    def _on_pending_timeout(self, member_id: str) -> None:
        self.pending_members.discard(member_id)

    def _on_join_timeout(self, _member_id: str) -> None:
        if self.state is GroupState.PREPARING_REBALANCE:
            self._on_join_deadline()

    def _on_sync_timeout(self, _member_id: str) -> None:
        if self.state is not GroupState.COMPLETING_REBALANCE:
            return
        # Members that never sent SyncGroup within the rebalance timeout are gone.
        for member in list(self.members.values()):
            if member.sync_ticket is None:
                self._remove_member(member, ErrorCode.unknown_member_id)
        self._prepare_rebalance()

    # ---------------------------------------------------------------------------------------------
    # Administration

    def check_deletable(self) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if self.state is not GroupState.EMPTY:
            return ErrorCode.non_empty_group
        return ErrorCode.none

    def mark_dead(self) -> list[Action]:
        for member_id in self.pending_members:
            self._emit(CancelTimer(TimerKey(TimerKind.PENDING, member_id)))
        self.pending_members.clear()
        self._emit(CancelTimer(JOIN_TIMER))
        self._emit(CancelTimer(SYNC_TIMER))
        self._transition(GroupState.DEAD)
        return self._take()

    def is_subscribed_to(self, topic: str) -> bool:
        return views.is_subscribed_to(self, topic)

    def describe(self) -> GroupDescription:
        return views.describe(self)

    def snapshot(self) -> GroupSnapshot:
        return views.snapshot(self)

    @classmethod
    def restore(
        cls,
        snapshot: GroupSnapshot,
        config: GroupConfig | None = None,
        new_member_id: MemberIdFactory = random_member_id,
    ) -> tuple[Group, list[Action]]:
        """Rebuild a persisted group: Stable with its members, each given a fresh session to prove
        it is still alive, or Empty."""
        group = cls(snapshot.group_id, config, new_member_id)
        group.generation_id = snapshot.generation_id
        group.protocol_type = snapshot.protocol_type
        group.protocol_name = snapshot.protocol_name
        for m in snapshot.members:
            member = Member.restored(m)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
            group._arm_session(member)
        if group.members:
            group.state = GroupState.STABLE
            leader = snapshot.leader_id
            group.leader_id = leader if leader in group.members else next(iter(group.members))
        else:
            group.protocol_name = None
        return group, group._take()

    # ---------------------------------------------------------------------------------------------
    # Join

    def _join_new_member(self, request: JoinRequest, ticket: int) -> None:
        if not self._accepts(None):
            self._respond(ticket, JoinResult(ErrorCode.group_max_size_reached, request.member_id))
            return
        member_id = self._new_member_id(request.group_instance_id or request.client_id or "member")
        instance_id = request.group_instance_id
        if instance_id is not None:
            # Static members skip MEMBER_ID_REQUIRED: the instance id already identifies them.
            old_member_id = self.static_members.get(instance_id)
            if old_member_id is not None and old_member_id in self.members:
                self._replace_static_member(request, old_member_id, member_id, ticket)
            else:
                self._add_member_and_rebalance(request, member_id, ticket)
        elif request.require_known_member_id:
            self.pending_members.add(member_id)
            self._emit(SetTimer(TimerKey(TimerKind.PENDING, member_id), request.session_timeout_ms))
            self._respond(ticket, JoinResult(ErrorCode.member_id_required, member_id))
        else:
            self._add_member_and_rebalance(request, member_id, ticket)

    def _join_known_member(self, request: JoinRequest, ticket: int) -> None:
        member_id = request.member_id
        if member_id in self.pending_members:
            if not self._accepts(member_id):
                self._respond(ticket, JoinResult(ErrorCode.group_max_size_reached, member_id))
                return
            self.pending_members.discard(member_id)
            self._emit(CancelTimer(TimerKey(TimerKind.PENDING, member_id)))
            self._add_member_and_rebalance(request, member_id, ticket)
            return
        if self._is_fenced(member_id, request.group_instance_id):
            self._respond(ticket, JoinResult(ErrorCode.fenced_instance_id, member_id))
            return
        member = self.members.get(member_id)
        if member is None:
            self._respond(ticket, JoinResult(ErrorCode.unknown_member_id, member_id))
            return
        unchanged = member.protocols == request.protocols
        if self.state is GroupState.COMPLETING_REBALANCE and unchanged:
            # The JoinGroup answer was lost: repeat it rather than start another rebalance.
            self._arm_session(member)
            self._respond(ticket, self._join_result(member))
        elif self.state is GroupState.STABLE and unchanged and member_id != self.leader_id:
            # A follower re-joining with nothing new gets the current generation back.
            self._arm_session(member)
            self._respond(ticket, self._join_result(member, with_members=False))
        else:
            # The leader re-joining (e.g. its metadata refresh saw new partitions), a changed
            # subscription, or the expected rejoin during PreparingRebalance.
            self._update_member(member, request, ticket)
            self._maybe_prepare_rebalance()

    def _add_member_and_rebalance(self, request: JoinRequest, member_id: str, ticket: int) -> None:
        member = Member.joining(request, member_id, join_ticket=ticket)
        if not self.members:
            self.protocol_type = request.protocol_type
        self.members[member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        self._new_member_added = True
        self._maybe_prepare_rebalance()

    def _update_member(self, member: Member, request: JoinRequest, ticket: int) -> None:
        if member.join_ticket is not None and member.join_ticket != ticket:
            # A duplicate JoinGroup (client retried on a new connection): the newest one waits.
            self._respond(member.join_ticket, JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.refresh(request)
        member.join_ticket = ticket

    def _replace_static_member(
        self, request: JoinRequest, old_member_id: str, member_id: str, ticket: int
    ) -> None:
        """A static member restarted (new member id, same instance id): the new incarnation takes
        over the old one's place and assignment; the old one is fenced."""
        old = self.members.pop(old_member_id)
        self._emit(CancelTimer(TimerKey(TimerKind.SESSION, old_member_id)))
        if old.join_ticket is not None:
            self._respond(old.join_ticket, JoinResult(ErrorCode.fenced_instance_id, old_member_id))
        if old.sync_ticket is not None:
            self._respond(old.sync_ticket, SyncResult(ErrorCode.fenced_instance_id))
        previous_leader = self.leader_id
        member = Member.joining(request, member_id, assignment=old.assignment)
        self.members[member_id] = member
        assert request.group_instance_id is not None
        self.static_members[request.group_instance_id] = member_id
        if self.leader_id == old_member_id:
            self.leader_id = member_id
        self._arm_session(member)
        if self.state is GroupState.STABLE and old.protocols == request.protocols:
            self._emit(Persist(self.group_id, self.snapshot()))
            is_leader = member_id == self.leader_id
            if is_leader and request.supports_skip_assignment:
                # KIP-814: it learns it leads (to watch metadata) but keeps the current assignment.
                result = self._join_result(member, skip_assignment=True)
            else:
                # Older clients: name the previous leader id so a rejoining leader acts as a
                # follower and fetches its unchanged assignment with SyncGroup.
                result = JoinResult(
                    error=ErrorCode.none,
                    member_id=member_id,
                    generation_id=self.generation_id,
                    protocol_type=self.protocol_type,
                    protocol_name=self.protocol_name,
                    leader_id=previous_leader or "",
                )
            self._respond(ticket, result)
            return
        member.join_ticket = ticket
        self._maybe_prepare_rebalance()

    def _maybe_prepare_rebalance(self) -> None:
        if self.state in (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance()

    def _prepare_rebalance(self) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            # Assignments of the abandoned generation must not reach anyone.
            for member in self.members.values():
                member.assignment = b""
                if member.sync_ticket is not None:
                    self._respond(member.sync_ticket, SyncResult(ErrorCode.rebalance_in_progress))
                    member.sync_ticket = None
            self._emit(CancelTimer(SYNC_TIMER))
        rebalance_timeout = self._rebalance_timeout_ms()
        delay = rebalance_timeout
        self._initial_delay = False
        if self.state is GroupState.EMPTY and self.config.initial_rebalance_delay_ms > 0:
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_timeout)
            self._initial_delay = True
            self._initial_remaining_ms = max(rebalance_timeout - delay, 0)
            self._new_member_added = False
        self._transition(GroupState.PREPARING_REBALANCE)
        self._emit(SetTimer(JOIN_TIMER, delay))

    def _on_join_deadline(self) -> None:
        if self._initial_delay and self._new_member_added and self._initial_remaining_ms > 0:
            # Members keep arriving: wait one more delay, never past the rebalance timeout.
            delay = min(self.config.initial_rebalance_delay_ms, self._initial_remaining_ms)
            self._initial_remaining_ms -= delay
            self._new_member_added = False
            self._emit(SetTimer(JOIN_TIMER, delay))
            return
        self._initial_delay = False
        self._complete_join()

    def _try_complete_join(self) -> None:
        if self.state is not GroupState.PREPARING_REBALANCE or self._initial_delay:
            return
        if self.pending_members:
            return
        if all(m.join_ticket is not None for m in self.members.values()):
            self._complete_join()

    def _complete_join(self) -> None:
        """Close the join phase: drop dynamic members that did not rejoin, start the next
        generation and answer every waiting JoinGroup (the leader gets everyone's metadata)."""
        self._emit(CancelTimer(JOIN_TIMER))
        for member in list(self.members.values()):
            if member.join_ticket is None and member.group_instance_id is None:
                self._remove_member(member, ErrorCode.unknown_member_id)
        joined = [m for m in self.members.values() if m.join_ticket is not None]
        if self.members and not joined:
            # Only static members that have not rejoined remain: give them another round.
            self._emit(SetTimer(JOIN_TIMER, self._rebalance_timeout_ms()))
            return
        if self.leader_id not in self.members or self.members[self.leader_id].join_ticket is None:
            self.leader_id = joined[0].member_id if joined else None
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self._transition(GroupState.EMPTY)
            self._emit(Persist(self.group_id, self.snapshot()))
            return
        self.protocol_name = protocols.select(list(self.members.values()), self.leader_id)
        self._transition(GroupState.COMPLETING_REBALANCE)
        for member in joined:
            assert member.join_ticket is not None
            self._respond(member.join_ticket, self._join_result(member))
            member.join_ticket = None
            self._arm_session(member)
        self._emit(SetTimer(SYNC_TIMER, self._rebalance_timeout_ms()))

    # ---------------------------------------------------------------------------------------------
    # Leave and expiry

    def _leave_one(self, identity: MemberIdentity) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if identity.group_instance_id is not None:
            member_id = self.static_members.get(identity.group_instance_id)
            if member_id is None or member_id not in self.members:
                return ErrorCode.unknown_member_id
            if identity.member_id != UNKNOWN_MEMBER_ID and identity.member_id != member_id:
                return ErrorCode.fenced_instance_id
            self._remove_member_and_update(self.members[member_id], ErrorCode.unknown_member_id)
            return ErrorCode.none
        if identity.member_id in self.pending_members:
            self.pending_members.discard(identity.member_id)
            self._emit(CancelTimer(TimerKey(TimerKind.PENDING, identity.member_id)))
            return ErrorCode.none
        member = self.members.get(identity.member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        self._remove_member_and_update(member, ErrorCode.unknown_member_id)
        return ErrorCode.none

    def _remove_member_and_update(self, member: Member, error: ErrorCode) -> None:
        self._remove_member(member, error)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance()

    def _remove_member(self, member: Member, error: ErrorCode) -> None:
        self._emit(CancelTimer(TimerKey(TimerKind.SESSION, member.member_id)))
        if member.join_ticket is not None:
            self._respond(member.join_ticket, JoinResult(error, member.member_id))
        if member.sync_ticket is not None:
            self._respond(member.sync_ticket, SyncResult(error))
        del self.members[member.member_id]
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member.member_id:
            del self.static_members[instance_id]
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    # ---------------------------------------------------------------------------------------------
    # Helpers

    def _check_member(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode | None:
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if self._is_fenced(member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        if generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        return None

    def _is_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def _supports_protocols(self, request: JoinRequest) -> bool:
        others = [m for m in self.members.values() if m.member_id != request.member_id]
        return protocols.compatible(others, self.protocol_type, request.protocol_type, request.protocols)

    def _accepts(self, member_id: str | None) -> bool:
        """``group.max.size``: known members may always rejoin, new ones only below the limit."""
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if member_id is not None and member_id in self.members:
            return True
        return len(self.members) < self.config.max_size

    def _rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _join_result(
        self, member: Member, with_members: bool = True, skip_assignment: bool = False
    ) -> JoinResult:
        is_leader = member.member_id == self.leader_id
        members: tuple[JoinedMember, ...] = ()
        if is_leader and with_members:
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()
            )
        return JoinResult(
            error=ErrorCode.none,
            member_id=member.member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader_id=self.leader_id or "",
            skip_assignment=skip_assignment,
            members=members,
        )

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.none, self.protocol_type, self.protocol_name, member.assignment)

    def _arm_session(self, member: Member) -> None:
        self._emit(SetTimer(TimerKey(TimerKind.SESSION, member.member_id), member.session_timeout_ms))

    def _transition(self, target: GroupState) -> None:
        check_transition(self.state, target)
        self.state = target

    def _respond(self, ticket: int, result: JoinResult | SyncResult) -> None:
        self._emit(Respond(ticket, result))

    def _emit(self, action: Action) -> None:
        self._out.append(action)

    def _take(self) -> list[Action]:
        out, self._out = self._out, []
        return out


# What an expired timer of each kind does (called with the group and the timer's member id).
_TIMER_HANDLERS: dict[TimerKind, Callable[[Group, str], None]] = {
    TimerKind.SESSION: Group._on_session_timeout,
    TimerKind.PENDING: Group._on_pending_timeout,
    TimerKind.JOIN: Group._on_join_timeout,
    TimerKind.SYNC: Group._on_sync_timeout,
}
