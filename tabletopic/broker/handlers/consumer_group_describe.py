"""ConsumerGroupDescribe (69): members, epochs and assignments of KIP-848 consumer groups.

A group id that is not a consumer group is GROUP_ID_NOT_FOUND (a classic group is described by
DescribeGroups), as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.assignors import TopicPartition
from tabletopic.broker.groups.consumer_coordinator import TopicIds
from tabletopic.broker.groups.consumer_group import ConsumerGroup
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.handlers.consumer_group_heartbeat import wire_assignment
from tabletopic.broker.handlers.describe_groups import _GROUP_OPERATIONS, _OPERATIONS_OMITTED
from tabletopic.broker.protocol.messages.consumer_groups import GroupsDescription


def _assignment(partitions: Iterable[TopicPartition], topics: TopicIds) -> dict[str, Any]:
    return wire_assignment(partitions, topics, names=True)


def _empty(group_id: str, error: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "error_code": error,
        "error_message": message,
        "group_id": group_id,
        "group_state": "Dead",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
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


def describe_groups(
    coordinator: GroupCoordinator,
    request: GroupsDescription,
    lookup: Callable[[str], G | None],
    kind: str,
    fields: Callable[[G], dict[str, Any]],
) -> dict[str, Any]:
    """ConsumerGroupDescribe and ShareGroupDescribe: each named group of its ``kind`` with its epochs
    and the ``fields`` of its type; any other id is GROUP_ID_NOT_FOUND, as in Kafka."""
    operations = _GROUP_OPERATIONS if request.include_authorized_operations else _OPERATIONS_OMITTED
    described = []
    for group_id in request.group_ids:
        refused = coordinator.consumer.refusal(group_id)
        group = lookup(group_id)
        if refused is not None:
            described.append(_empty(group_id, refused, None))
        elif group is None:
            message = f"group {group_id} is not a {kind} group"
            described.append(_empty(group_id, ErrorCode.group_id_not_found, message))
        else:
            described.append(
                {
                    "error_code": ErrorCode.none,
                    "error_message": None,
                    "group_id": group_id,
                    "group_state": group.state,
                    "group_epoch": group.group_epoch,
                    "assignment_epoch": group.assignment_epoch,
                    **fields(group),
                    "authorized_operations": operations,
                }
            )
    return {"throttle_time": 0, "groups": described}


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: GroupsDescription
) -> dict[str, Any]:
    topics: TopicIds = coordinator.consumer.topics()

    def fields(group: ConsumerGroup) -> dict[str, Any]:
        return {
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

    return describe_groups(coordinator, request, coordinator.consumer.group, "consumer", fields)
