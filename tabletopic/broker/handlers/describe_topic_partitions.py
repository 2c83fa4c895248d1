"""DescribeTopicPartitions (75): Metadata's topic part with pagination (a partition limit and a
cursor naming the topic and partition to resume at)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import ZERO_UUID
from tabletopic.broker.handlers.metadata import found_topic_fields, partition_entry
from tabletopic.broker.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from tabletopic.broker.protocol.responses import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(
    broker: BrokerService, ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    names = sorted(t.name for t in request.topics) if request.topics else sorted(broker.list_topics())
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    limit = max(request.response_partition_limit, 1)
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: Cursor | None = None
    remaining = limit
    for name in names:
        topic = broker.topics.get(name)
        if topic is None:
            topics.append(
                {
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "name": name,
                    "topic_id": ZERO_UUID,
                    "partitions": [],
                }
            )
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions: list[DescribeTopicPartitionsResponsePartition] = []
        for index in range(first, topic.partition_count):
            if remaining == 0:
                next_cursor = {"topic_name": name, "partition_index": index}
                break
            partitions.append(
                {**partition_entry(broker, name, index), "eligible_leader_replicas": [], "last_known_elr": []}
            )
            remaining -= 1
        topics.append({**found_topic_fields(topic), "partitions": partitions})
        if next_cursor is not None:
            break
    return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}
