"""A KIP-932 share group's membership as a sans-IO state machine: ShareGroupHeartbeats in, answers
and session-timer actions out; its driver is :mod:`tabletopic.broker.groups.share_coordinator`.

Share groups need no reconciliation: a partition may be assigned to many members at once (the
share-partition hands each record to one of them), so there is nothing to revoke before assigning.
Every member is assigned every partition of the topics it subscribes to — what Kafka's ``simple``
assignor does when there are no more partitions than members, and always valid. The group epoch
grows whenever membership, a subscription or the subscribed topics' partitions change; a member's
epoch is set to the group epoch on each heartbeat, since its assignment is current at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tabletopic.broker.groups.assignors import TopicPartition
from tabletopic.broker.groups.consumer_group import (
    LEAVE_EPOCH,
    CancelTimer,
    HeartbeatResult,
    SetTimer,
    TimerKind,
)

SHARE_ASSIGNOR = "simple"
ShareAction = SetTimer | CancelTimer


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    """A ShareGroupHeartbeat; ``subscribed_topic_names`` None means "unchanged"."""

    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed_topic_names: tuple[str, ...]
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assigned: frozenset[TopicPartition] = field(default_factory=frozenset)


class ShareGroup:
    """The members of one share group. ``session_timeout_ms`` fences a member that stops
    heartbeating (its records are released by the driver)."""

    def __init__(self, group_id: str, session_timeout_ms: int, max_size: int) -> None:
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.max_size = max_size
        self.group_epoch = 0
        self.members: dict[str, ShareMember] = {}

    @property
    def state(self) -> str:
        """Kafka's share group states: Empty, Stable (no reconciliation, so never Assigning)."""
        return "Stable" if self.members else "Empty"

    @property
    def assignment_epoch(self) -> int:
        return self.group_epoch

    def heartbeat(
        self, request: ShareHeartbeat, partition_counts: Mapping[str, int]
    ) -> tuple[HeartbeatResult, list[ShareAction]]:
        member_id, epoch = request.member_id, request.member_epoch
        member = self.members.get(member_id)
        if epoch == LEAVE_EPOCH:
            if member is None:
                return HeartbeatResult(ErrorCode.unknown_member_id, member_id, epoch), []
            return HeartbeatResult(ErrorCode.none, member_id, LEAVE_EPOCH), self.remove(member_id)
        if epoch == 0:
            if request.subscribed_topic_names is None:
                message = "a joining member must send its subscribed topic names"
                return HeartbeatResult(ErrorCode.invalid_request, member_id, epoch, message=message), []
            if member is None and len(self.members) >= self.max_size:
                return HeartbeatResult(ErrorCode.group_max_size_reached, member_id, epoch), []
            member = self.members[member_id] = ShareMember(member_id, 0, request.subscribed_topic_names)
            self.group_epoch += 1
        elif member is None:
            return HeartbeatResult(ErrorCode.unknown_member_id, member_id, epoch), []
        elif epoch != member.member_epoch:
            return HeartbeatResult(ErrorCode.fenced_member_epoch, member_id, epoch), []
        member.rack_id = request.rack_id if request.rack_id is not None else member.rack_id
        member.client_id, member.client_host = request.client_id, request.client_host
        if (names := request.subscribed_topic_names) is not None and names != member.subscribed_topic_names:
            member.subscribed_topic_names = names
            self.group_epoch += 1
        assigned = frozenset(
            (topic, index)
            for topic in member.subscribed_topic_names
            for index in range(partition_counts.get(topic, 0))
        )
        if assigned != member.assigned and member.member_epoch != 0:
            self.group_epoch += 1  # a subscribed topic appeared or grew
        member.assigned = assigned
        member.member_epoch = self.group_epoch
        timer = SetTimer(TimerKind.SESSION, member_id, self.session_timeout_ms)
        return HeartbeatResult(ErrorCode.none, member_id, member.member_epoch, assigned), [timer]

    def remove(self, member_id: str) -> list[ShareAction]:
        """A member left or its session timed out."""
        if self.members.pop(member_id, None) is None:
            return []
        self.group_epoch += 1
        return [CancelTimer(TimerKind.SESSION, member_id)]
