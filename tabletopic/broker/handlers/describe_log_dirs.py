"""DescribeLogDirs (35): one logical "log dir", the object store; sizes are not tracked per
partition (they would need a full scan), so they read as 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from tabletopic.broker.protocol.responses import DescribeLogDirsResponse, DescribeLogDirsTopic

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(
    broker: BrokerService, ctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if request.topics is None:
        wanted = [(t.name, list(range(t.partition_count))) for t in broker.topics.all()]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in request.topics]
    topics: list[DescribeLogDirsTopic] = []
    for name, partitions in wanted:
        topic = broker.topics.get(name)
        if topic is None:
            continue
        topics.append(
            {
                "name": name,
                "partitions": [
                    {"partition_index": p, "partition_size": 0, "offset_lag": 0, "is_future_key": False}
                    for p in partitions
                    if 0 <= p < topic.partition_count
                ],
            }
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "results": [
            {
                "error_code": ErrorCode.none,
                "log_dir": str(broker.config.data_dir),
                "topics": topics,
                "total_bytes": -1,
                "usable_bytes": -1,
            }
        ],
    }
