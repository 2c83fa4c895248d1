"""Plain data of the classic consumer-group protocol: members, group states, the inputs a
:class:`~tabletopic.broker.groups.group.Group` accepts and the actions it asks its driver to perform.

Everything here is a frozen value or a small mutable record with no I/O, so the state machine can be
driven by unit tests without an event loop (the h11 pattern: events in, actions out).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Annotations only: kio's error table costs 0.15 s to import, and the CLI loads this module for
    # the group keys' defaults.
    from kio.schema.errors import ErrorCode

# What a client sends as member id before the coordinator gave it one.
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
# The protocol type of Kafka consumers: only their member metadata is a subscription the coordinator
# can read (to know which topics a group consumes, for OffsetDelete and offset retention).
CONSUMER_PROTOCOL_TYPE = "consumer"

Protocols = tuple[tuple[str, bytes], ...]
"""A member's supported protocols in its preference order: ``(name, metadata)`` pairs."""


class GroupState(enum.Enum):
    """The classic group states, spelled as Kafka reports them in DescribeGroups and ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Broker-side limits (Kafka's ``group.*`` settings, same defaults).

    ``initial_rebalance_delay_ms`` lets a freshly started consumer fleet join in one rebalance instead
    of one per member; tests usually set it to 0.
    """

    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000


@dataclass(slots=True)
class Member:
    """One member of a classic group as the coordinator tracks it.

    ``join_ticket`` / ``sync_ticket`` are the driver's handles of a JoinGroup / SyncGroup response
    that is being held back until the rebalance moves on; ``None`` when the member waits for nothing.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_ticket: int | None = None
    sync_ticket: int | None = None
    # JoinGroup v9+ (KIP-814): a rejoining static leader can be told to skip the assignment.
    supports_skip_assignment: bool = False

    @classmethod
    def joining(
        cls, request: JoinRequest, member_id: str, *, join_ticket: int | None = None, assignment: bytes = b""
    ) -> Member:
        """A new member as its JoinGroup request describes it."""
        described = {name: getattr(request, name) for name in _DESCRIBED_MEMBER_FIELDS}
        return cls(member_id=member_id, assignment=assignment, join_ticket=join_ticket, **described)

    def refresh(self, request: JoinRequest) -> None:
        """The member as its new JoinGroup describes it, but for its instance id and protocol type:
        those placed it in the group (and among the static members) when it first joined."""
        for name in _REFRESHED_MEMBER_FIELDS:
            setattr(self, name, getattr(request, name))

    @classmethod
    def restored(cls, snapshot: MemberSnapshot) -> Member:
        """A member as persisted (waiting for nothing, as after a restart)."""
        return cls(**{name: getattr(snapshot, name) for name in _PERSISTED_MEMBER_FIELDS})

    def snapshot(self) -> MemberSnapshot:
        """What of this member is persisted: every field of :class:`MemberSnapshot`."""
        return MemberSnapshot(**{name: getattr(self, name) for name in _PERSISTED_MEMBER_FIELDS})

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


# ---------------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup request, version differences already resolved by the handler."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    # v4+: a member without an id first gets MEMBER_ID_REQUIRED and an id to rejoin with (KIP-394).
    require_known_member_id: bool = True
    supports_skip_assignment: bool = False
    reason: str | None = None


# What a JoinGroup tells of its member: the fields JoinRequest and Member share, but the member id
# (which the group may hand out).
_DESCRIBED_MEMBER_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(JoinRequest)
    if f.name != "member_id" and f.name in {g.name for g in dataclasses.fields(Member)}
)
_REFRESHED_MEMBER_FIELDS = tuple(
    name for name in _DESCRIBED_MEMBER_FIELDS if name not in ("group_instance_id", "protocol_type")
)


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """One entry of a LeaveGroup request."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


# ---------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    members: tuple[MemberDescription, ...]


# ---------------------------------------------------------------------------------------------------
# Persistence


@dataclass(frozen=True, slots=True)
class MemberSnapshot:
    """The persisted part of a :class:`Member` (same field names)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes


_PERSISTED_MEMBER_FIELDS = tuple(f.name for f in dataclasses.fields(MemberSnapshot))


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """What survives a restart: a Stable generation with its assignments, or an Empty group."""

    group_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str | None
    members: tuple[MemberSnapshot, ...]


# ---------------------------------------------------------------------------------------------------
# Actions the driver performs, in the order given


class TimerKind(enum.Enum):
    """The timers of a group: ``SESSION`` and ``PENDING`` run per member, ``JOIN`` and ``SYNC`` per
    group."""

    SESSION = "session"  # a member's session: no heartbeat within session.timeout.ms removes it
    PENDING = "pending"  # a member id handed out with MEMBER_ID_REQUIRED that was never used to join
    JOIN = "join"  # the rebalance's join phase ends (initial delay or rebalance timeout)
    SYNC = "sync"  # members that never sent SyncGroup within the rebalance timeout are dropped


@dataclass(frozen=True, slots=True)
class TimerKey:
    """Names one timer of a group; ``member_id`` is empty for the per-group timers."""

    kind: TimerKind
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class SetTimer:
    """(Re)arm a timer; an armed timer with the same key is replaced."""

    key: TimerKey
    delay_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


@dataclass(frozen=True, slots=True)
class Respond:
    """Complete the held-back response ``ticket``. Responses that follow a :class:`Persist` in the
    same batch must not be sent before that write is durable."""

    ticket: int
    result: JoinResult | SyncResult


@dataclass(frozen=True, slots=True)
class Persist:
    """Write the group's membership; ``snapshot`` ``None`` deletes the group and its offsets."""

    group_id: str
    snapshot: GroupSnapshot | None


Action = SetTimer | CancelTimer | Respond | Persist
