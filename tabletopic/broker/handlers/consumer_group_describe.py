"""ConsumerGroupDescribe (69): members, epochs and assignments of KIP-848 consumer groups.

A group id that is not a consumer group is GROUP_ID_NOT_FOUND (a classic group is described by
DescribeGroups), as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypedDict, TypeVar

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.assignors import TopicPartition
from tabletopic.broker.groups.consumer_coordinator import TopicIds
from tabletopic.broker.groups.consumer_group import ConsumerGroup
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.handlers.consumer_group_heartbeat import assigned_by_topic
from tabletopic.broker.handlers.describe_groups import _GROUP_OPERATIONS, _OPERATIONS_OMITTED
from tabletopic.broker.protocol.messages.consumer_groups import GroupsDescription
from tabletopic.broker.protocol.responses import (
    ConsumerGroupDescribeAssignment,
    ConsumerGroupDescribeDescribedGroup,
    ConsumerGroupDescribeResponse,
)


def _assignment(partitions: Iterable[TopicPartition], topics: TopicIds) -> ConsumerGroupDescribeAssignment:
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "partitions": assigned, "topic_name": name}
            for name, topic_id, assigned in assigned_by_topic(partitions, topics)
        ]
    }


class GroupHeader(TypedDict):
    """The fields ConsumerGroupDescribe and ShareGroupDescribe show of every group id, whatever the
    group's type; its assignor and members are the type's own."""

    error_code: ErrorCode
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    authorized_operations: int


def _empty(group_id: str, error: ErrorCode, message: str | None) -> GroupHeader:
    return {
        "error_code": error,
        "error_message": message,
        "group_id": group_id,
        "group_state": "Dead",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "authorized_operations": _OPERATIONS_OMITTED,
    }


class DescribedGroup(Protocol):
    """What a KIP-848 or KIP-932 group shows of itself in its Describe API."""

    @property
    def state(self) -> str: ...
    @property
    def group_epoch(self) -> int: ...
    @property
    def assignment_epoch(self) -> int: ...


G = TypeVar("G", bound=DescribedGroup)
D = TypeVar("D")


def describe_groups(
    coordinator: GroupCoordinator,
    request: GroupsDescription,
    lookup: Callable[[str], G | None],
    kind: str,
    fields: Callable[[GroupHeader, G | None], D],
) -> list[D]:
    """ConsumerGroupDescribe and ShareGroupDescribe: each named group of its ``kind`` with its epochs
    and the ``fields`` of its type (None: no group, no assignor, no members); any other id is
    GROUP_ID_NOT_FOUND, as in Kafka."""
    operations = _GROUP_OPERATIONS if request.include_authorized_operations else _OPERATIONS_OMITTED
    described: list[D] = []
    for group_id in request.group_ids:
        refused = coordinator.consumer.refusal(group_id)
        group = lookup(group_id)
        if refused is not None:
            described.append(fields(_empty(group_id, refused, None), None))
        elif group is None:
            message = f"group {group_id} is not a {kind} group"
            described.append(fields(_empty(group_id, ErrorCode.group_id_not_found, message), None))
        else:
            header: GroupHeader = {
                "error_code": ErrorCode.none,
                "error_message": None,
                "group_id": group_id,
                "group_state": group.state,
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "authorized_operations": operations,
            }
            described.append(fields(header, group))
    return described


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: GroupsDescription
) -> ConsumerGroupDescribeResponse:
    topics: TopicIds = coordinator.consumer.topics()

    def fields(header: GroupHeader, group: ConsumerGroup | None) -> ConsumerGroupDescribeDescribedGroup:
        if group is None:
            return {**header, "assignor_name": "", "members": []}
        return {
            **header,
            "assignor_name": group.assignor,
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "assignment": _assignment(m.assigned, topics),
                    "target_assignment": _assignment(group.target.get(m.member_id, ()), topics),
                    "member_type": 1,  # 1: uses the consumer protocol (Kafka 4.1's field)
                }
                for m in group.members.values()
            ],
        }

    groups = describe_groups(coordinator, request, coordinator.consumer.group, "consumer", fields)
    return {"throttle_time": 0, "groups": groups}
