"""ConsumerGroupHeartbeat (68): join, stay in and leave a KIP-848 consumer group.

Topics travel by id on the wire and by name in the group (:mod:`tabletopic.broker.groups.consumer_group`);
this handler translates. Version 0 lets the coordinator pick a member id; from version 1 the
consumer generates it and an empty one is INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.assignors import TopicPartition
from tabletopic.broker.groups.consumer_coordinator import TopicIds
from tabletopic.broker.groups.consumer_group import HeartbeatRequest
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.handlers.join_group import client_host
from tabletopic.broker.protocol.messages.consumer_groups import (
    ConsumerGroupHeartbeatRequest,
    subscribed_topic_regex,
)
from tabletopic.broker.protocol.responses import (
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatResponse,
)


def _ms(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    groups = coordinator.consumer
    topics = groups.topics()
    member_id = request.member_id
    if not member_id:
        if ctx.api_version >= 1 or request.member_epoch != 0:
            return _error(ErrorCode.invalid_request, "the member id must not be empty", request)
        member_id = str(uuid.uuid4())
    owned = None
    if request.topic_partitions is not None:
        names = {topic_id: name for name, (topic_id, _) in topics.items()}
        owned = frozenset(
            (names[t.topic_id], int(p))
            for t in request.topic_partitions
            if t.topic_id in names
            for p in t.partitions
        )
    result = groups.heartbeat(
        request.group_id,
        HeartbeatRequest(
            member_id=member_id,
            member_epoch=int(request.member_epoch),
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=_ms(request.rebalance_timeout),
            subscribed_topic_names=None
            if request.subscribed_topic_names is None
            else tuple(str(t) for t in request.subscribed_topic_names),
            subscribed_topic_regex=subscribed_topic_regex(request, ctx.api_version),
            server_assignor=request.server_assignor,
            owned=owned,
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
        ),
    )
    assignment = None
    if result.assignment is not None and result.error is ErrorCode.none:
        assignment = wire_assignment(result.assignment, topics)
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "error_message": result.message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval": groups.settings.heartbeat_interval_ms,
        "assignment": assignment,
    }


def assigned_by_topic(
    assigned: Iterable[TopicPartition], topics: TopicIds
) -> list[tuple[str, uuid.UUID, list[int]]]:
    """An assignment's partitions by topic, as (name, id, partitions) of the topics that exist."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(assigned):
        by_topic.setdefault(topic, []).append(partition)
    return [(name, topics[name][0], partitions) for name, partitions in by_topic.items() if name in topics]


def wire_assignment(assigned: Iterable[TopicPartition], topics: TopicIds) -> ConsumerGroupHeartbeatAssignment:
    """An assignment as the heartbeat answers carry it, partitions by topic id (the Describe APIs show
    it with the topic names too: :func:`assigned_by_topic`)."""
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "partitions": partitions}
            for _, topic_id, partitions in assigned_by_topic(assigned, topics)
        ]
    }


def _error(
    error: ErrorCode, message: str, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    return {
        "throttle_time": 0,
        "error_code": error,
        "error_message": message,
        "member_id": request.member_id or None,
        "member_epoch": request.member_epoch,
        "heartbeat_interval": 0,
        "assignment": None,
    }
