"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3), earliest local (-4) and offset
by timestamp.

Latest with isolation_level READ_COMMITTED (v2+) is the last stable offset, as Kafka answers it: the
end a read_committed consumer sees, and how the table coordinator learns a partition's committed end
from a leader on another broker.

By timestamp the answer is the first *record* whose timestamp reaches the target, as Kafka answers:
the first batch whose max timestamp reaches it is found by binary search over the stream (batches
are assumed time-ordered, as Kafka's time index assumes), then that batch's records are read.
MAX_TIMESTAMP is the first record carrying the largest timestamp. A batch whose records cannot be
read falls back to its header (its first offset and max timestamp).

Under READ_COMMITTED both lookups search the whole partition, then answer offset -1, timestamp -1
when the record found sits at or above the last stable offset, as Kafka does (ReplicaManager drops
an answer at or past the last fetchable offset): an open transaction's records are not revealed,
and MAX_TIMESTAMP does not fall back to the largest committed timestamp (KIP-734 keeps Kafka's
rule). Once the transaction ends, the same lookup names them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import not_served
from tabletopic.broker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest
from tabletopic.broker.protocol.responses import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from tabletopic.broker.protocol.sentinels import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    MAX_TIMESTAMP,
    READ_COMMITTED,
)
from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import max_timestamp_of
from tabletopic.records.timestamps import first_at_or_after
from tabletopic.s3stream.streams import StreamError, StreamStore

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)

REPLICA_UPLOAD_GAP_S = 0.2
REPLICA_UPLOAD_TIMEOUT_S = 2.0


class _Gate:
    """Lets one caller through at most every ``gap`` seconds; the others wait their turn (a
    coordinator of another table asking a moment later must still get its upload)."""

    def __init__(self, gap: float) -> None:
        self.gap, self.next = gap, 0.0

    async def turn(self, patience: float) -> bool:
        """Wait for a turn; False, at once, when none comes within ``patience`` seconds."""
        now = time.monotonic()
        at = max(now, self.next)
        if at - now > patience:
            return False
        self.next = at + self.gap
        await asyncio.sleep(at - now)
        return True


_replica_uploads = _Gate(REPLICA_UPLOAD_GAP_S)


async def offset_for_timestamp(store: StreamStore, stream_id: int, target: int) -> tuple[int, int]:
    """``(offset, timestamp)`` of the first batch with max timestamp >= target, or (-1, -1)."""
    info = store.stream_info(stream_id)
    low, high = info.start_offset, info.end_offset
    while low < high:
        middle = (low + high) // 2
        batch = (await store.fetch(stream_id, middle, 1))[0]
        if max_timestamp_of(batch.payload) >= target:
            high = max(low, batch.base_offset)
        else:
            low = batch.next_offset
    while low < info.end_offset:
        batch = (await store.fetch(stream_id, low, 1))[0]
        max_ts = max_timestamp_of(batch.payload)
        if max_ts >= target:
            return _record_at_or_after(batch.payload, batch.base_offset, target, max_ts)
        low = batch.next_offset  # only when batches are not time-ordered
    return -1, -1


def _record_at_or_after(
    payload: bytes | memoryview, base_offset: int, target: int, max_ts: int
) -> tuple[int, int]:
    try:
        found = first_at_or_after(payload, base_offset, target)
    except RecordBatchError:
        found = None
    return found if found is not None else (base_offset, max_ts)


async def max_timestamp_offset(store: StreamStore, stream_id: int) -> tuple[int, int]:
    info = store.stream_info(stream_id)
    best: tuple[int, int, bytes | memoryview] | None = None  # base offset, max timestamp, batch
    offset = info.start_offset
    while offset < info.end_offset:
        batches = await store.fetch(stream_id, offset, 4 << 20)
        if not batches:
            break
        for batch in batches:
            ts = max_timestamp_of(batch.payload)
            if best is None or ts > best[1]:
                best = (batch.base_offset, ts, batch.payload)
        offset = batches[-1].next_offset
    if best is None:
        return -1, -1
    return _record_at_or_after(best[2], best[0], best[1], best[1])


async def _partition(
    broker: BrokerService, name: str, p: ListOffsetsPartition, committed: bool = False
) -> ListOffsetsPartitionResponse:
    index = p.partition_index
    topic = broker.topics.get(name)
    if topic is None or not 0 <= index < topic.partition_count:
        return _answer(index, ErrorCode.unknown_topic_or_partition)
    refused = not_served(broker, name, index, p.current_leader_epoch)
    if refused is not None:
        return _answer(index, refused)
    stream_id = topic.streams[index]
    store = broker.store
    try:
        found = await _offset(broker, stream_id, p.timestamp, committed)
        # The epoch of the leader that wrote the batch answered, as Kafka reports it (KIP-320).
        epochs = store.epochs(stream_id)
    except StreamError:
        return _answer(index, ErrorCode.kafka_storage_error)
    if found is None:
        return _answer(index, ErrorCode.invalid_request)
    offset, ts = found
    if offset < 0:
        return _answer(index, ErrorCode.none)
    return _answer(index, ErrorCode.none, ts, offset, epochs.epoch_at(offset))


async def _upload_for_replica(broker: BrokerService, request: ListOffsetsRequest) -> None:
    """Another broker asks as a replica (the table coordinator of a topic, before a cycle): upload
    what the partitions led here acknowledged, so that it reads them up to now. On a shared WAL an
    acknowledged append otherwise reaches other brokers only at the next upload
    (``s3stream.upload.interval.ms``). Bounded in time, and one such upload every
    :data:`REPLICA_UPLOAD_GAP_S` at the most, so no client can make the broker write an object per
    request."""
    streams = []
    for wanted in request.topics:
        topic = broker.topics.get(wanted.name)
        if topic is None:
            continue
        for p in wanted.partitions:
            index = p.partition_index
            if 0 <= index < topic.partition_count and broker.leadership.leads(wanted.name, index):
                streams.append(topic.streams[index])
    streams = broker.store.not_uploaded(streams)
    if not streams:  # nothing to upload: no turn taken (idle tables ask every cycle)
        return
    try:
        if await _replica_uploads.turn(patience=REPLICA_UPLOAD_TIMEOUT_S / 2):
            await asyncio.wait_for(broker.store.flush(streams), REPLICA_UPLOAD_TIMEOUT_S)
    except (TimeoutError, StreamError) as exc:
        log.debug("upload asked by a replica not done: %s", exc)


def _answer(
    index: int, code: ErrorCode, timestamp: int = -1, offset: int = -1, leader_epoch: int = -1
) -> ListOffsetsPartitionResponse:
    return {
        "partition_index": index,
        "error_code": code,
        "timestamp": timestamp,
        "offset": offset,
        "leader_epoch": leader_epoch,
    }


async def _offset(
    broker: BrokerService, stream_id: int, timestamp: int, committed: bool
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` answering a ListOffsets ``timestamp`` (-1, -1 when none is
    visible); None for a negative timestamp that names no lookup."""
    store = broker.store
    info = store.stream_info(stream_id)
    # What this isolation level may see. Taken before any search, so a transaction committing
    # meanwhile only hides its records this once, never shows an open one.
    fetchable = info.end_offset
    if committed:
        fetchable = broker.transactions.partitions.last_stable_offset(stream_id, info.end_offset)
    if timestamp == LATEST:
        return fetchable, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL, LATEST_TIERED):
        return info.start_offset, -1
    if timestamp != MAX_TIMESTAMP and timestamp < 0:
        return None
    if timestamp == MAX_TIMESTAMP:
        offset, ts = await max_timestamp_offset(store, stream_id)
    else:
        offset, ts = await offset_for_timestamp(store, stream_id, timestamp)
    if committed and offset >= fetchable:
        return -1, -1
    return offset, ts


async def handle(
    broker: BrokerService, ctx: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    committed = request.isolation_level == READ_COMMITTED
    if request.replica_id >= 0:
        await _upload_for_replica(broker, request)
    topics: list[ListOffsetsTopicResponse] = []
    for topic in request.topics:
        partitions = [await _partition(broker, topic.name, p, committed) for p in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
