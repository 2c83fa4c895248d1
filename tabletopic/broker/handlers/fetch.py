"""Fetch (1): read whole stored batches with their base offsets patched in, long-polling with
``StreamStore.wait_for_data`` until ``min_bytes`` are ready or ``max_wait`` runs out.

The response is written by the zero-copy encoder (``protocol/fetch_encoder.py``): stored batches go
to the socket as they are, behind 8-byte base-offset pieces.

No fetch sessions (KIP-227): every answer carries session id 0, which tells clients to keep sending
full fetch requests; that is a correct, if chattier, implementation of the protocol.
Records are never null, even when empty: a null makes librdkafka loop forever.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import ZERO_UUID
from tabletopic.broker.protocol import WireResponse
from tabletopic.broker.protocol.fetch_encoder import FetchedPartition, encode_fetch_response
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.s3stream.streams import OffsetOutOfRange, StreamError, StreamNotFound

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

_INT64 = struct.Struct(">q")


@dataclass(slots=True, kw_only=True)
class PartitionRead(FetchedPartition):
    """One requested partition: where to read, and (inherited) the answer the encoder writes."""

    stream_id: int = -1
    fetch_offset: int
    max_bytes: int
    # Served from object storage although another broker leads it (a client of this broker's zone).
    snapshot: bool = False


@dataclass(slots=True)
class TopicRead:
    name: str | None
    topic_id: uuid.UUID
    partitions: list[PartitionRead]


def _resolve(broker: BrokerService, request: Any, version: int, zone: str | None = None) -> list[TopicRead]:
    router = broker.zone_router
    result = []
    for wanted in request.topics:
        if version >= 13:
            wanted_id = wanted.topic_id or ZERO_UUID  # kio reads the all-zero id as None
            topic = broker.topics.by_id(wanted_id)
            missing = ErrorCode.unknown_topic_id
            name, topic_id = (topic.name if topic else None), wanted_id
        else:
            topic = broker.topics.get(wanted.topic)
            missing = ErrorCode.unknown_topic_or_partition
            name, topic_id = wanted.topic, (topic.topic_id if topic else ZERO_UUID)
        reads = []
        for p in wanted.partitions:
            read = PartitionRead(
                p.partition, fetch_offset=p.fetch_offset, max_bytes=max(p.partition_max_bytes, 0)
            )
            if topic is None or not 0 <= p.partition < topic.partition_count:
                read.error_code = missing
            elif not broker.leadership.leads(topic.name, p.partition):
                if router is not None and router.serves_here(zone):
                    read.stream_id, read.snapshot = topic.streams[p.partition], True
                else:
                    read.error_code = ErrorCode.not_leader_or_follower
            else:
                read.stream_id = topic.streams[p.partition]
                if router is not None and version >= 11 and zone is not None:
                    # KIP-392: a consumer of another zone reads from a broker of its own zone.
                    elsewhere = router.route(zone, broker.node_id, p.partition)
                    if elsewhere != broker.node_id:
                        read.preferred_read_replica = elsewhere
            reads.append(read)
        result.append(TopicRead(name, topic_id, reads))
    return result


async def _read(broker: BrokerService, topics: list[TopicRead], max_bytes: int) -> int:
    """Fill each partition with batches; returns the total bytes read."""
    store = broker.store
    total = 0
    for topic in topics:
        for read in topic.partitions:
            if read.error_code is not ErrorCode.none and read.error_code is not ErrorCode.offset_out_of_range:
                continue
            read.pieces, read.size = [], 0
            if read.snapshot:
                total += await _read_snapshot(broker, topic.name, read, max_bytes - total, total)
                continue
            try:
                info = store.stream_info(read.stream_id)
            except StreamNotFound:
                # In a cluster the stream closes when leadership moves away mid-request.
                moved = broker.clustered
                read.error_code = (
                    ErrorCode.not_leader_or_follower if moved else ErrorCode.unknown_topic_or_partition
                )
                continue
            read.high_watermark, read.log_start_offset = info.end_offset, info.start_offset
            if not info.start_offset <= read.fetch_offset <= info.end_offset:
                read.error_code = ErrorCode.offset_out_of_range
                continue
            read.error_code = ErrorCode.none
            budget = min(read.max_bytes, max_bytes - total)
            if read.fetch_offset == info.end_offset or (budget <= 0 and total > 0):
                continue
            if read.preferred_read_replica >= 0:
                continue  # the consumer is sent to a broker of its zone: no data from here
            try:
                batches = await store.fetch(read.stream_id, read.fetch_offset, max(budget, 1))
            except OffsetOutOfRange:
                read.error_code = ErrorCode.offset_out_of_range
                continue
            except StreamError:
                read.error_code = ErrorCode.kafka_storage_error
                continue
            for batch in batches:
                payload = memoryview(batch.payload)
                read.pieces.append(_INT64.pack(batch.base_offset))
                read.pieces.append(payload[8:])
                read.size += len(payload)
            total += read.size
            if read.size and topic.name is not None:
                broker.record_bytes(topic.name, read.partition_index, bytes_out=read.size)
    return total


async def _read_snapshot(
    broker: BrokerService, name: str | None, read: PartitionRead, budget: int, total: int
) -> int:
    """Fill a partition another broker leads from object storage (a client of this zone)."""
    store = broker.store
    if not isinstance(store, S3StreamStore):
        read.error_code = ErrorCode.not_leader_or_follower
        return 0
    budget = min(read.max_bytes, budget)
    try:
        info, batches = await store.read_snapshot(read.stream_id, read.fetch_offset, max(budget, 1))
    except OffsetOutOfRange as exc:
        read.high_watermark, read.log_start_offset = exc.end, exc.start
        # Past the end: the leader acknowledged it a moment ago and the view has not seen it yet;
        # the consumer waits (an out-of-range answer would reset its position).
        read.error_code = ErrorCode.offset_out_of_range if exc.offset < exc.start else ErrorCode.none
        return 0
    except StreamNotFound:
        read.error_code = ErrorCode.unknown_topic_or_partition
        return 0
    except StreamError:
        read.error_code = ErrorCode.kafka_storage_error
        return 0
    read.error_code = ErrorCode.none
    read.high_watermark, read.log_start_offset = info.end_offset, info.start_offset
    if budget <= 0 and total > 0:
        return 0
    for batch in batches:
        payload = memoryview(batch.payload)
        read.pieces.append(_INT64.pack(batch.base_offset))
        read.pieces.append(payload[8:])
        read.size += len(payload)
    if broker.zone_router is not None:
        broker.zone_router.routed_bytes.labels("read").inc(read.size)
    return read.size


async def _wait_for_any(broker: BrokerService, topics: list[TopicRead], wait_seconds: float) -> None:
    futures = []
    if any(read.snapshot for topic in topics for read in topic.partitions):
        # Reads from object storage have no local append to wake them: poll at a short interval.
        wait_seconds = min(wait_seconds, 0.05)
    for topic in topics:
        for read in topic.partitions:
            if read.error_code is ErrorCode.none and read.stream_id >= 0:
                try:
                    futures.append(broker.store.wait_for_data(read.stream_id, read.fetch_offset))
                except StreamError:
                    continue
    if not futures:
        await asyncio.sleep(wait_seconds)
        return
    try:
        await asyncio.wait(futures, timeout=wait_seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            if not future.done():
                future.cancel()


async def fetch(
    broker: BrokerService, request: Any, version: int, zone: str | None = None
) -> tuple[list[TopicRead], ErrorCode]:
    """Resolve and read (long-polling as asked); shared by the dict and the zero-copy encoders.
    ``zone`` is the client's (rack-aware routing), None when unknown."""
    if getattr(request, "session_id", 0) != 0:
        return [], ErrorCode.fetch_session_id_not_found
    if getattr(request, "session_epoch", -1) not in (0, -1):
        return [], ErrorCode.invalid_fetch_session_epoch
    topics = _resolve(broker, request, version, zone)
    max_bytes = request.max_bytes if version >= 3 else 0x7FFFFFFF
    max_bytes = max(max_bytes, 1)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait.total_seconds()
    min_bytes = max(request.min_bytes, 1)
    while True:
        total = await _read(broker, topics, max_bytes)
        remaining = deadline - loop.time()
        errors = any(r.error_code is not ErrorCode.none for t in topics for r in t.partitions)
        if total >= min_bytes or remaining <= 0 or errors:
            return topics, ErrorCode.none
        await _wait_for_any(broker, topics, remaining)


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> WireResponse:
    router = broker.zone_router
    zone = None if router is None else router.zone_of(ctx, getattr(request, "rack_id", None))
    topics, error = await fetch(broker, request, ctx.api_version, zone)
    if router is not None:
        router.count(zone, sum(r.size for t in topics for r in t.partitions), "out")
    return WireResponse(encode_fetch_response(ctx.correlation_id, ctx.api_version, int(error), topics))
