"""OffsetForLeaderEpoch (23): consumers validate their position after a leader change (KIP-320).

A partition here has had one leader epoch (0) forever and is never truncated, so the end offset of
any epoch a client can know is the high watermark: validation always passes, as it should.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import topic_with_partition
from tabletopic.s3stream.streams import StreamError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

LEADER_EPOCH = 0


def _partition(broker: BrokerService, name: str, p: Any) -> dict[str, Any]:
    result = {"partition": p.partition, "error_code": ErrorCode.none, "leader_epoch": -1, "end_offset": -1}
    topic = topic_with_partition(broker, name, p.partition)
    if topic is None:
        return {**result, "error_code": ErrorCode.unknown_topic_or_partition}
    if getattr(p, "current_leader_epoch", -1) > LEADER_EPOCH:
        return {**result, "error_code": ErrorCode.unknown_leader_epoch}
    try:
        end = broker.store.stream_info(topic.streams[p.partition]).end_offset
    except StreamError:
        return {**result, "error_code": ErrorCode.kafka_storage_error}
    return {**result, "leader_epoch": LEADER_EPOCH, "end_offset": end}


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {"topic": t.topic, "partitions": [_partition(broker, t.topic, p) for p in t.partitions]}
            for t in request.topics
        ],
    }
