"""JoinGroup (11), SyncGroup (14), Heartbeat (12) and LeaveGroup (13), version-free: the classic
group protocol's membership requests.

Versions add fields (JoinGroup's rebalance timeout from v1, static membership's
``group_instance_id`` from v5 / v3 / v3, JoinGroup's ``reason`` from v8, SyncGroup's protocol
type and name from v5) and LeaveGroup names one member before v3 and a batch from v3, so each
request is a frozen dataclass read once from kio's class of any version, a field a version lacks
taking Kafka's default for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class JoinGroupProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    session_timeout: timedelta
    member_id: str
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]
    rebalance_timeout: timedelta | None = None  # v1 on; v0 rebalances within the session timeout
    group_instance_id: str | None = None  # v5 on
    reason: str | None = None  # v8 on


@dataclass(frozen=True, slots=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[SyncGroupAssignment, ...]
    group_instance_id: str | None = None  # v3 on
    protocol_type: str | None = None  # v5 on
    protocol_name: str | None = None  # v5 on


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None  # v3 on


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None
    reason: str | None = None  # v5 on


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    member_id: str = ""  # v0 to v2: the one member leaving
    members: tuple[LeavingMember, ...] = ()  # v3 on
