"""A KIP-848 ("consumer" type) group as a sans-IO state machine: heartbeats in, answers and timer
actions out; its driver is :mod:`tabletopic.broker.groups.consumer_coordinator`.

The three epochs of KIP-848:

* the **group epoch** grows whenever what the assignment depends on changes (a member joins,
  leaves or changes its subscription; a subscribed topic appears or gains partitions);
* the **target assignment** is recomputed by the server-side assignor at once and stamped with
  the group epoch (so the assignment epoch always equals the group epoch here);
* each **member epoch** moves up to the assignment epoch by reconciliation, one heartbeat at a time.

Reconciliation revokes before it assigns: a member whose current partitions are not all in its
target first keeps only the intersection (the rest are "pending revocation", still its own) and
stays at its epoch until a heartbeat reports it no longer owns them; a partition of the target still
owned (assigned or pending revocation) by another member is withheld until that member let it go.
So no partition is ever owned by two members at once — :meth:`ConsumerGroup.owners` is the single
map that guarantees it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tabletopic.broker.groups.assignors import ASSIGNORS, Racks, TopicPartition
from tabletopic.broker.groups.settings import GroupSettings

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.Enum):
    """Kafka's names for where a member is in its reconciliation (ConsumerGroupDescribe shows the
    group state; these are for logs and tests)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class TimerKind(enum.Enum):
    SESSION = "session"
    REBALANCE = "rebalance"  # a member sits on partitions it must revoke


@dataclass(frozen=True, slots=True)
class SetTimer:
    kind: TimerKind
    member_id: str
    delay_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    kind: TimerKind
    member_id: str


Action = SetTimer | CancelTimer


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat, version differences resolved; ``None`` fields are "unchanged"."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: frozenset[TopicPartition] | None = None
    client_id: str = ""
    client_host: str = ""
    # A classic member (JoinGroup into this group) brings its own session timeout and protocol.
    session_timeout_ms: int | None = None
    classic_protocol: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str
    member_epoch: int
    assignment: frozenset[TopicPartition] | None = None  # None: unchanged, not sent
    message: str | None = None


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: frozenset[TopicPartition] = frozenset()
    pending_revocation: frozenset[TopicPartition] = frozenset()
    session_timeout_ms: int | None = None  # a classic member's own; the group's otherwise
    classic_protocol: str | None = None  # set for a classic member: the assignor name it joined with

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        pattern = self.subscribed_topic_regex
        return pattern is not None and _compiled(pattern).fullmatch(topic) is not None


_patterns: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    compiled = _patterns.get(pattern)
    if compiled is None:
        compiled = _patterns[pattern] = re.compile(pattern)
    return compiled


def check_regex(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a subscription (INVALID_REGULAR_EXPRESSION), or None.

    Kafka evaluates RE2/J patterns; Python's ``re`` accepts a superset of their syntax (look-around,
    back-references) which a Kafka broker would refuse; the common subset matches the same names.
    """
    try:
        _compiled(pattern)
    except re.error as exc:
        return f"invalid regular expression {pattern!r}: {exc}"
    return None


def _join_problem(request: HeartbeatRequest) -> str | None:
    """Why a joining heartbeat (epoch 0) is INVALID_REQUEST, in Kafka's words, or None."""
    if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
        return "SubscribedTopicNames or SubscribedTopicRegex must be set in the first request"
    if request.rebalance_timeout_ms < 0:
        return "RebalanceTimeoutMs must be provided in the first request"
    return None


@dataclass(slots=True)
class ConsumerGroup:
    """One consumer group; ``topics`` passed to each call is the cluster's topic -> partition count."""

    group_id: str
    settings: GroupSettings = field(default_factory=GroupSettings)
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    subscribed_partitions: dict[str, int] = field(default_factory=dict)
    # A static member that left with epoch -2 keeps its place (and partitions) until its session
    # times out: instance id -> member id.
    static_members: dict[str, str] = field(default_factory=dict)
    # The racks of the subscribed topics' partitions (their leaders'), asked when a target is
    # computed: a lookup the driver provides, so this class stays free of I/O.
    partition_racks: Callable[[Mapping[str, int]], Mapping[TopicPartition, str]] = lambda _topics: {}

    @classmethod
    def upgraded(
        cls,
        group_id: str,
        settings: GroupSettings,
        epoch: int,
        members: list[ConsumerMember],
        partition_racks: Callable[[Mapping[str, int]], Mapping[TopicPartition, str]],
    ) -> tuple[ConsumerGroup, list[Action]]:
        """A classic group made a consumer group as a consumer-protocol member joins it (Kafka 4's
        online upgrade). Its members stay, as classic members at the classic generation with the
        partitions they were given, which is the target until the joining member's heartbeat
        computes the next one; each keeps a session timer."""
        group = cls(group_id, settings, epoch, epoch, partition_racks=partition_racks)
        for member in members:
            member.member_epoch = epoch
            group.members[member.member_id] = member
            group.target[member.member_id] = member.assigned
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        return group, [group.session_timer(m) for m in members]

    # -----------------------------------------------------------------------------------------
    # Queries

    @property
    def state(self) -> str:
        """Kafka's consumer group states: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    @property
    def assignor(self) -> str:
        preferred = [m.server_assignor for m in self.members.values() if m.server_assignor in ASSIGNORS]
        if preferred:
            return max(sorted(set(p for p in preferred if p)), key=preferred.count)
        return self.settings.assignors[0]

    def owners(self) -> dict[TopicPartition, str]:
        """Who owns each owned partition (assigned or pending revocation)."""
        owned: dict[TopicPartition, str] = {}
        for member in self.members.values():
            for tp in member.assigned | member.pending_revocation:
                assert tp not in owned, f"{tp} owned by {owned[tp]} and {member.member_id}"
                owned[tp] = member.member_id
        return owned

    def check_offset_commit(self, member_id: str, member_epoch: int) -> ErrorCode:
        """OffsetCommit v9+ of a member: its epoch must be its current one (Kafka: STALE_MEMBER_EPOCH
        otherwise; an epoch of -1 with an empty member id is a simple committer, allowed only while
        the group is empty)."""
        if not member_id and member_epoch < 0:
            return ErrorCode.none if not self.members else ErrorCode.unknown_member_id
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    # -----------------------------------------------------------------------------------------
    # Heartbeats

    def heartbeat(
        self, request: HeartbeatRequest, topics: Mapping[str, int]
    ) -> tuple[HeartbeatResult, list[Action]]:
        """Handle one heartbeat: join (epoch 0), leave (-1, or -2 for a static member), or keep
        reconciling; ``topics`` are the cluster's topics and their partition counts."""
        actions: list[Action] = []
        epoch = request.member_epoch
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request, topics, actions), actions
        member = self.members.get(request.member_id)
        if epoch == 0:
            problem = _join_problem(request)
            if problem is not None:
                return HeartbeatResult(
                    ErrorCode.invalid_request, request.member_id, 0, message=problem
                ), actions
            member, error = self._join(request, member, topics, actions)
            if member is None:
                return HeartbeatResult(error, request.member_id, 0, message=error.name), actions
        elif member is None:
            return HeartbeatResult(ErrorCode.unknown_member_id, request.member_id, epoch), actions
        elif not self._epoch_acceptable(member, request):
            return HeartbeatResult(ErrorCode.fenced_member_epoch, request.member_id, epoch), actions
        self._update(member, request, topics)
        actions.append(self.session_timer(member))
        before = (member.member_epoch, member.assigned)
        self._reconcile(member, request.owned, actions)
        changed = (member.member_epoch, member.assigned) != before
        send = epoch == 0 or changed or (request.owned is not None and request.owned != member.assigned)
        result = HeartbeatResult(
            ErrorCode.none, member.member_id, member.member_epoch, member.assigned if send else None
        )
        return result, actions

    def session_timer(self, member: ConsumerMember) -> SetTimer:
        """The timer that fences ``member`` unless it heartbeats again in time."""
        timeout = member.session_timeout_ms or self.settings.session_timeout_ms
        return SetTimer(TimerKind.SESSION, member.member_id, timeout)

    def classic_heartbeat(self, member_id: str, generation: int) -> tuple[ErrorCode, list[Action]]:
        """Heartbeat of a classic member: it keeps its session; REBALANCE_IN_PROGRESS tells it to
        join again when its assignment is not (yet) its target, as a classic coordinator would. Its
        partitions change only when it joins (its JoinGroup reports what it still owns)."""
        member = self.members.get(member_id)
        if member is None or member.classic_protocol is None:
            return ErrorCode.unknown_member_id, []
        if generation != member.member_epoch:
            return ErrorCode.illegal_generation, []
        settled = (
            member.state is MemberState.STABLE
            and member.member_epoch == self.assignment_epoch
            and member.assigned == self.target.get(member_id, frozenset())
        )
        error = ErrorCode.none if settled else ErrorCode.rebalance_in_progress
        return error, [self.session_timer(member)]

    def _epoch_acceptable(self, member: ConsumerMember, request: HeartbeatRequest) -> bool:
        if request.member_epoch == member.member_epoch:
            return True
        # The answer that moved the member to its epoch may have been lost: its previous epoch is
        # fine as long as it does not claim partitions it no longer has.
        return (
            request.member_epoch == member.previous_member_epoch
            and request.owned is not None
            and request.owned <= member.assigned
        )

    def _join(
        self,
        request: HeartbeatRequest,
        member: ConsumerMember | None,
        topics: Mapping[str, int],
        actions: list[Action],
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        if member is not None:
            # A member joining again under its id (it lost its state): its partitions are released.
            self._remove(member.member_id, actions)
        if request.instance_id is not None:
            previous_id = self.static_members.get(request.instance_id)
            previous = self.members.get(previous_id) if previous_id is not None else None
            if previous is not None and previous.member_epoch != STATIC_LEAVE_EPOCH:
                return None, ErrorCode.unreleased_instance_id
            if previous is not None:
                # The static member is back: it takes over its old place, partitions and target.
                del self.members[previous.member_id]
                actions.append(CancelTimer(TimerKind.SESSION, previous.member_id))
                previous.member_id = request.member_id
                previous.member_epoch = previous.previous_member_epoch
                self.members[request.member_id] = previous
                self.target[request.member_id] = self.target.pop(previous_id or "", frozenset())
                self.static_members[request.instance_id] = request.member_id
                return previous, ErrorCode.none
        if len(self.members) >= self.settings.max_size:
            return None, ErrorCode.group_max_size_reached
        member = ConsumerMember(request.member_id, instance_id=request.instance_id)
        self.members[member.member_id] = member
        if request.instance_id is not None:
            self.static_members[request.instance_id] = member.member_id
        return member, ErrorCode.none

    def _update(self, member: ConsumerMember, request: HeartbeatRequest, topics: Mapping[str, int]) -> None:
        """Apply the changed fields of a heartbeat; a changed subscription bumps the group epoch.
        The subscribed topics' partition counts are checked on every heartbeat too, so a new topic
        matching a regex (or new partitions) reach the target assignment within a heartbeat."""
        subscription_changed = False
        if (
            request.subscribed_topic_names is not None
            and request.subscribed_topic_names != member.subscribed_topic_names
        ):
            member.subscribed_topic_names = request.subscribed_topic_names
            subscription_changed = True
        if request.subscribed_topic_regex is not None:
            regex = request.subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                subscription_changed = True
        if request.server_assignor is not None and request.server_assignor != member.server_assignor:
            member.server_assignor = request.server_assignor
            subscription_changed = True
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.client_id:
            member.client_id, member.client_host = request.client_id, request.client_host
        if request.session_timeout_ms is not None:
            member.session_timeout_ms = request.session_timeout_ms
        if request.classic_protocol is not None:
            member.classic_protocol = request.classic_protocol
        # One bump per heartbeat, whatever changed (a new member always brings a subscription).
        if subscription_changed or self._subscribed_partitions(topics) != self.subscribed_partitions:
            self._bump()
        if self.assignment_epoch < self.group_epoch:
            self._compute_target(topics)

    def _subscribed_partitions(self, topics: Mapping[str, int]) -> dict[str, int]:
        return {t: n for t, n in topics.items() if any(m.subscribes_to(t) for m in self.members.values())}

    def _bump(self) -> None:
        self.group_epoch += 1

    def _compute_target(self, topics: Mapping[str, int]) -> None:
        self.subscribed_partitions = self._subscribed_partitions(topics)
        subscriptions = {
            m.member_id: frozenset(t for t in self.subscribed_partitions if m.subscribes_to(t))
            for m in self.members.values()
        }
        racks = Racks(
            {m.member_id: m.rack_id for m in self.members.values() if m.rack_id},
            self.partition_racks(self.subscribed_partitions),
        )
        self.target = ASSIGNORS[self.assignor](subscriptions, self.subscribed_partitions, self.target, racks)
        self.assignment_epoch = self.group_epoch

    def _reconcile(
        self, member: ConsumerMember, owned: frozenset[TopicPartition] | None, actions: list[Action]
    ) -> None:
        """Move ``member`` towards its target, revoking before assigning (see the module doc)."""
        target = self.target.get(member.member_id, frozenset())
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & member.pending_revocation:
                return  # still waiting for the member to let go
            member.pending_revocation = frozenset()
            actions.append(CancelTimer(TimerKind.REBALANCE, member.member_id))
        elif (
            member.member_epoch == self.assignment_epoch
            and member.state is MemberState.STABLE
            and member.assigned == target
        ):
            return
        revoke = member.assigned - target
        if revoke:
            member.assigned &= target
            member.pending_revocation = revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            actions.append(SetTimer(TimerKind.REBALANCE, member.member_id, member.rebalance_timeout_ms))
            return
        others = self.owners()
        free = frozenset(tp for tp in target if others.get(tp, member.member_id) == member.member_id)
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        member.assigned = free
        member.state = MemberState.STABLE if free == target else MemberState.UNRELEASED_PARTITIONS

    # -----------------------------------------------------------------------------------------
    # Leaving and timers

    def _leave(
        self, request: HeartbeatRequest, topics: Mapping[str, int], actions: list[Action]
    ) -> HeartbeatResult:
        member = self.members.get(request.member_id)
        if member is None:
            return HeartbeatResult(ErrorCode.unknown_member_id, request.member_id, request.member_epoch)
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Keeps its partitions for a session timeout, for the same instance to come back.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            actions.append(self.session_timer(member))
            return HeartbeatResult(ErrorCode.none, member.member_id, STATIC_LEAVE_EPOCH)
        self._remove(member.member_id, actions)
        self._compute_target(topics)
        return HeartbeatResult(ErrorCode.none, member.member_id, LEAVE_EPOCH)

    def _remove(self, member_id: str, actions: list[Action]) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        actions.append(CancelTimer(TimerKind.SESSION, member_id))
        actions.append(CancelTimer(TimerKind.REBALANCE, member_id))
        self._bump()

    def on_timer(self, kind: TimerKind, member_id: str, topics: Mapping[str, int]) -> list[Action]:
        """A member's session expired, or it did not revoke within its rebalance timeout: it is
        fenced (removed) and its partitions go to the others."""
        actions: list[Action] = []
        member = self.members.get(member_id)
        if member is None:
            return actions
        if kind is TimerKind.REBALANCE and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return actions
        self._remove(member_id, actions)
        self._compute_target(topics)
        return actions
