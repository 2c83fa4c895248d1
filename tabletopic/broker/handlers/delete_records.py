"""DeleteRecords (21): move a partition's log start offset forward (-1 means the high watermark)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import partitions_response, topic_with_partition
from tabletopic.broker.protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
from tabletopic.broker.protocol.responses import DeleteRecordsPartitionResult, DeleteRecordsResponse
from tabletopic.s3stream.streams import StreamError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def _partition(
    broker: BrokerService, name: str, p: DeleteRecordsPartition
) -> DeleteRecordsPartitionResult:
    result: DeleteRecordsPartitionResult = {
        "partition_index": p.partition_index,
        "low_watermark": -1,
        "error_code": ErrorCode.none,
    }
    topic = topic_with_partition(broker, name, p.partition_index)
    if topic is None:
        return {**result, "error_code": ErrorCode.unknown_topic_or_partition}
    stream_id = topic.streams[p.partition_index]
    try:
        info = broker.store.stream_info(stream_id)
        target = info.end_offset if p.offset == -1 else p.offset
        if not 0 <= target <= info.end_offset:
            return {**result, "error_code": ErrorCode.offset_out_of_range}
        await broker.store.trim(stream_id, target)
        return {**result, "low_watermark": broker.store.stream_info(stream_id).start_offset}
    except StreamError:
        return {**result, "error_code": ErrorCode.kafka_storage_error}


async def handle(
    broker: BrokerService, ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    return await partitions_response(broker, request, _partition)
