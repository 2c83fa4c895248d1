"""OffsetForLeaderEpoch (23): consumers validate their position after a leader change (KIP-320).

A consumer that read up to offset P under leader epoch E asks, when it learns of a newer leader,
where epoch E ended; if that is below P its position was truncated away. The answer comes from the
partition's stream epoch history (``s3stream/epochs.py``), recorded in the metadata database each
time a leader opens the stream, so whichever broker leads now answers for every earlier leader. A
stream is never truncated here, so an honest answer never reports truncation for data a client
was given.

The request's ``current_leader_epoch`` is checked first, as Kafka does: a client with stale
metadata is told FENCED_LEADER_EPOCH, one ahead of this broker UNKNOWN_LEADER_EPOCH; both retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import not_served, topic_with_partition
from tabletopic.broker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from tabletopic.broker.protocol.responses import (
    OffsetForLeaderEpochEpochEndOffset,
    OffsetForLeaderEpochResponse,
)
from tabletopic.s3stream.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from tabletopic.s3stream.streams import StreamError, StreamNotFound

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


def _partition(
    broker: BrokerService, name: str, p: OffsetForLeaderPartition
) -> OffsetForLeaderEpochEpochEndOffset:
    result: OffsetForLeaderEpochEpochEndOffset = {
        "partition": p.partition,
        "error_code": ErrorCode.none,
        "leader_epoch": UNDEFINED_EPOCH,
        "end_offset": UNDEFINED_OFFSET,
    }
    topic = topic_with_partition(broker, name, p.partition)
    if topic is None:
        return {**result, "error_code": ErrorCode.unknown_topic_or_partition}
    refused = not_served(broker, name, p.partition, p.current_leader_epoch)
    if refused is not None:
        return {**result, "error_code": refused}
    sid = topic.streams[p.partition]
    try:
        end = broker.store.stream_info(sid).end_offset
        epochs = broker.store.epochs(sid)
    except StreamNotFound:  # leadership moved away while the request waited
        return {**result, "error_code": ErrorCode.not_leader_or_follower}
    except StreamError:
        return {**result, "error_code": ErrorCode.kafka_storage_error}
    epoch, end_offset = epochs.end_offset_for(p.leader_epoch, end)
    return {**result, "leader_epoch": epoch, "end_offset": end_offset}


async def handle(
    broker: BrokerService, ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    return {
        "throttle_time": 0,
        "topics": [
            {"topic": t.topic, "partitions": [_partition(broker, t.topic, p) for p in t.partitions]}
            for t in request.topics
        ],
    }
