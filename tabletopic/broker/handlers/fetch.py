"""Fetch (1): read whole stored batches with their base offsets patched in, long-polling with
``StreamStore.wait_for_data`` until ``min_bytes`` are ready or ``max_wait`` runs out.

Sizes follow Kafka: ``max_bytes`` bounds the response and ``partition_max_bytes`` each partition;
the first batch of the response is returned whole even when it exceeds either (so a consumer always
progresses), and no other batch ever makes the response exceed them.

The response is written by the zero-copy encoder (``protocol/fetch_encoder.py``): stored batches go
to the socket as they are, behind 16-byte pieces holding the base offset, the batch length and the
partition leader epoch of the leader that appended the batch (from the stream's epoch history).

Transactions: every answer carries the partition's last stable offset; at read_committed
isolation only data below it is returned, with the aborted transactions of the range read so the
client drops their records (as Kafka's consumer does with its own list).

Fetch sessions (KIP-227, ``broker/fetch_sessions.py``): an incremental request reads every partition
of its session and answers only those with records, errors or changed offsets.
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
from tabletopic.broker.fetch_sessions import PartitionKey, SessionPartition
from tabletopic.broker.handlers.common import ZERO_UUID, leader_epoch_error, node_endpoints
from tabletopic.broker.protocol import WireResponse
from tabletopic.broker.protocol.fetch_encoder import FetchedPartition, encode_fetch_response
from tabletopic.broker.protocol.messages.fetch import FetchRequest, client_rack
from tabletopic.broker.protocol.sentinels import READ_COMMITTED
from tabletopic.broker.topics import Topic
from tabletopic.s3stream.epochs import NO_EPOCHS, EpochHistory
from tabletopic.s3stream.shared import SnapshotReader
from tabletopic.s3stream.streams import OffsetOutOfRange, StreamError, StreamNotFound
from tabletopic.tasks import first_of

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

# What the broker writes in front of each stored batch: its base offset (assigned at append, so
# not in the stored bytes), then batchLength as stored and the partitionLeaderEpoch of the leader
# that appended it, as Kafka stamps it (KIP-101). Both sit outside the batch CRC.
_BATCH_PREFIX = struct.Struct(">qii")
_BATCH_LENGTH = struct.Struct(">i")
_PREFIX_SIZE = 16
# The first version whose answer carries NodeEndpoints (KIP-951): a refused partition names its
# current leader from here on only, as Kafka does, so that the leader's address always goes with its
# name. Named alone (v12-v15 have the field), a leader the client's metadata lacks (a broker started
# since it last asked) is one it cannot reach: kafka-python 3.0.12 then raised UnknownBrokerIdError
# out of poll() and its consumer stopped.
LEADER_HINTS_SINCE = 16


def add_batch(pieces: list[Any], base_offset: int, payload: memoryview, epochs: EpochHistory) -> None:
    """Append one stored batch to a response (Fetch and ShareFetch): the prefix written here, with
    the epoch of the leader that wrote it, the rest as stored."""
    length = _BATCH_LENGTH.unpack_from(payload, 8)[0]
    pieces.append(_BATCH_PREFIX.pack(base_offset, length, epochs.epoch_at(base_offset)))
    pieces.append(payload[_PREFIX_SIZE:])


@dataclass(slots=True, kw_only=True, init=False)
class PartitionRead(FetchedPartition):
    """One requested partition: where to read, and (inherited) the answer the encoder writes."""

    stream_id: int = -1
    fetch_offset: int
    max_bytes: int
    next_offset: int = -1  # after the last batch read
    key: PartitionKey | None = None  # the partition in the fetch session
    # Served from object storage although another broker leads it (a client of this broker's zone).
    snapshot: bool = False

    def __init__(
        self, index: int, fetch_offset: int, max_bytes: int, key: PartitionKey | None = None
    ) -> None:
        # Written out, positional: a Fetch makes one per partition it names (librdkafka names every
        # one, every time), and the generated keyword __init__ of all sixteen fields took 0.42 µs
        # against 0.26.
        self.partition_index = index
        self.error_code = ErrorCode.none
        self.high_watermark = -1
        self.log_start_offset = -1
        self.pieces = ()
        self.size = 0
        self.last_stable_offset = -2
        self.aborted = ()
        self.preferred_read_replica = -1
        self.current_leader = None
        self.stream_id = -1
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.next_offset = -1
        self.key = key
        self.snapshot = False


@dataclass(slots=True)
class TopicRead:
    name: str | None
    topic_id: uuid.UUID
    partitions: list[PartitionRead]
    topic: Topic | None = None


def _resolve(
    broker: BrokerService,
    wanted: list[tuple[PartitionKey, SessionPartition]],
    version: int,
    zone: str | None = None,
) -> list[TopicRead]:
    """Group the partitions to read by topic (in request order) and find their streams; ``zone``
    is the client's, for rack-aware routing (None when unknown)."""
    router = broker.zone_router
    serving_epoch = broker.leadership.serving_epoch
    by_topic: dict[str | uuid.UUID, TopicRead] = {}
    for key, cached in wanted:
        topic_key, index = key
        read = by_topic.get(topic_key)
        if read is None:
            if version >= 13:
                assert isinstance(topic_key, uuid.UUID)
                topic = broker.topics.by_id(topic_key)
                read = TopicRead(topic.name if topic else None, topic_key, [], topic)
            else:
                topic = broker.topics.get(str(topic_key))
                read = TopicRead(str(topic_key), topic.topic_id if topic else ZERO_UUID, [], topic)
            by_topic[topic_key] = read
        partition = PartitionRead(index, cached.fetch_offset, cached.max_bytes, key)
        topic = read.topic
        if topic is None or not 0 <= index < len(topic.streams):
            partition.error_code = (
                ErrorCode.unknown_topic_id if version >= 13 else ErrorCode.unknown_topic_or_partition
            )
        elif (serving := serving_epoch(topic.name, index)) is None:
            if router is not None and router.serves_here(zone):
                partition.stream_id, partition.snapshot = topic.streams[index], True
                known = broker.leadership.leader(topic.name, index)[1]
                partition.error_code = (
                    leader_epoch_error(cached.current_leader_epoch, known) or ErrorCode.none
                )
            else:
                partition.error_code = ErrorCode.not_leader_or_follower
        elif (stale := leader_epoch_error(cached.current_leader_epoch, serving)) is not None:
            partition.error_code = stale
        else:
            partition.stream_id = topic.streams[index]
            if router is not None and version >= 11 and zone is not None:
                # KIP-392: a consumer of another zone reads from a broker of its own zone.
                elsewhere = router.route(zone, broker.node_id, index)
                if elsewhere != broker.node_id:
                    partition.preferred_read_replica = elsewhere
        read.partitions.append(partition)
    return list(by_topic.values())


def _rereads(read: PartitionRead, woken: set[int] | None) -> bool:
    """Whether a read after a long poll reads this partition again: a partition served from
    object storage always (nothing wakes a poll for it), any other if its stream woke the poll."""
    return woken is None or read.snapshot or read.stream_id in woken


async def _read(
    broker: BrokerService,
    topics: list[TopicRead],
    max_bytes: int,
    committed: bool = False,
    woken: set[int] | None = None,
) -> int:
    """Fill each partition with batches; returns the total bytes the answer holds. ``committed``
    (read_committed isolation) reads only below the last stable offset and lists the aborted
    transactions of the range read. ``woken``: after a long poll, the streams that woke it; only
    those are read again (with an incremental session of 170 partitions, re-reading all of them
    for the one that has data cost more than the rest of the Fetch), the others keep what the read
    before the poll found."""
    store = broker.store
    txns = broker.transactions.partitions
    total = 0
    if woken is not None:
        total = sum(r.size for t in topics for r in t.partitions if not _rereads(r, woken))
    for topic in topics:
        for read in topic.partitions:
            if read.error_code is not ErrorCode.none and read.error_code is not ErrorCode.offset_out_of_range:
                continue
            if woken is not None and not _rereads(read, woken):
                continue
            read.pieces, read.size = (), 0
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
            read.last_stable_offset = stable = txns.last_stable_offset(read.stream_id, info.end_offset)
            if not info.start_offset <= read.fetch_offset <= info.end_offset:
                read.error_code = ErrorCode.offset_out_of_range
                continue
            read.error_code = ErrorCode.none
            budget = min(read.max_bytes, max_bytes - total)
            limit = stable if committed else info.end_offset
            if read.fetch_offset >= limit or (budget <= 0 and total > 0):
                continue
            if read.preferred_read_replica >= 0:
                continue  # the consumer is sent to a broker of its zone: no data from here
            epochs = store.epochs(read.stream_id)  # no await since stream_info: still here
            try:
                batches = await store.fetch(read.stream_id, read.fetch_offset, max(budget, 1), limit)
            except OffsetOutOfRange:
                read.error_code = ErrorCode.offset_out_of_range
                continue
            except StreamError:
                read.error_code = ErrorCode.kafka_storage_error
                continue
            pieces: list[Any] = []
            read.pieces = pieces
            for batch in batches:
                payload = memoryview(batch.payload)
                # Kafka's rule: only the response's very first batch may exceed a limit (so a
                # consumer always progresses); any other batch must fit both limits.
                if read.size + len(payload) > budget and (total > 0 or read.size > 0):
                    break
                add_batch(pieces, batch.base_offset, payload, epochs)
                read.size += len(payload)
                read.next_offset = batch.next_offset
            if committed and read.size:
                read.aborted = txns.aborted_between(read.stream_id, read.fetch_offset, read.next_offset)
            total += read.size
            if read.size and topic.name is not None:
                broker.count_read(topic.name, read.partition_index, read.size)
    return total


async def _read_snapshot(
    broker: BrokerService, name: str | None, read: PartitionRead, budget: int, total: int
) -> int:
    """Fill a partition another broker leads from object storage (a client of this zone)."""
    store = broker.store
    if not isinstance(store, SnapshotReader):
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
    epochs = store.epochs(read.stream_id) if batches else NO_EPOCHS
    pieces: list[Any] = []
    read.pieces = pieces
    for batch in batches:
        payload = memoryview(batch.payload)
        add_batch(pieces, batch.base_offset, payload, epochs)
        read.size += len(payload)
    if broker.zone_router is not None:
        broker.zone_router.routed_bytes.labels("read").inc(read.size)
    return read.size


async def _wait_for_any(
    broker: BrokerService, topics: list[TopicRead], wait_seconds: float, committed: bool = False
) -> set[int]:
    """Wait until a partition read here has data past its fetch offset, or its stream leaves
    this broker, at most ``wait_seconds``; returns the streams that did (to read again)."""
    wanted = []
    for topic in topics:
        for read in topic.partitions:
            if read.snapshot:
                # Reads from object storage have no local append to wake them: poll at a short interval.
                wait_seconds = min(wait_seconds, 0.05)
            elif read.error_code is ErrorCode.none and read.stream_id >= 0:
                # Data past the last stable offset does not help a read_committed fetch: wait for
                # the next append instead (the transaction's marker is one).
                offset = max(read.fetch_offset, read.high_watermark) if committed else read.fetch_offset
                wanted.append((read.stream_id, offset))
    watch = broker.store.wait_for_data(wanted)
    try:
        await first_of([watch.ready], wait_seconds)
    finally:
        watch.close()
    return watch.woken


async def fetch(
    broker: BrokerService, request: FetchRequest, version: int, zone: str | None = None
) -> tuple[list[TopicRead], ErrorCode, int]:
    """Resolve and read (long-polling as asked); shared by the dict and the zero-copy encoders.
    ``zone`` is the client's (rack-aware routing), None when unknown. Returns the topics to answer,
    the top-level error and the fetch session id."""
    session = broker.fetch_sessions.resolve(request, version)
    if session.error is not ErrorCode.none:
        return [], session.error, 0
    topics = _resolve(broker, session.partitions, version, zone)
    topics = await _fetch_topics(broker, request, version, topics)
    if session.session is None:
        return topics, ErrorCode.none, 0
    # Remember what each partition's answer said; an incremental answer lists only what changed.
    for topic in topics:
        kept = []
        for read in topic.partitions:
            assert read.key is not None
            changed = session.session.changed(
                read.key, read.high_watermark, read.last_stable_offset, read.log_start_offset
            )
            if not session.incremental or changed or read.size or read.error_code is not ErrorCode.none:
                kept.append(read)
        topic.partitions = kept
    return [t for t in topics if t.partitions], ErrorCode.none, session.session.session_id


async def _fetch_topics(
    broker: BrokerService, request: FetchRequest, version: int, topics: list[TopicRead]
) -> list[TopicRead]:
    max_bytes = request.max_bytes if version >= 3 else 0x7FFFFFFF
    max_bytes = max(max_bytes, 1)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait.total_seconds()
    min_bytes = max(request.min_bytes, 1)
    committed = request.isolation_level == READ_COMMITTED
    woken: set[int] | None = None
    while True:
        total = await _read(broker, topics, max_bytes, committed, woken)
        remaining = deadline - loop.time()
        if total >= min_bytes or total >= max_bytes or remaining <= 0 or _answer_now(topics):
            return topics
        woken = await _wait_for_any(broker, topics, remaining, committed)


def _answer_now(topics: list[TopicRead]) -> bool:
    """Whether the answer goes out without waiting for ``min_bytes``, as Kafka's does: a partition
    has an error, or a consumer is sent to a broker of its zone (its data is there, not here)."""
    return any(
        r.error_code is not ErrorCode.none or r.preferred_read_replica >= 0
        for t in topics
        for r in t.partitions
    )


async def handle(broker: BrokerService, ctx: RequestContext, request: FetchRequest) -> WireResponse:
    router = broker.zone_router
    zone = None if router is None else router.zone_of(ctx, client_rack(request, ctx.api_version))
    topics, error, session_id = await fetch(broker, request, ctx.api_version, zone)
    if router is not None:
        router.count(zone, sum(r.size for t in topics for r in t.partitions), "out")
    # A consumer of a zone is sent to its zone's brokers, never to a leader elsewhere.
    hints = zone is None and ctx.api_version >= LEADER_HINTS_SINCE
    leaders = _name_leaders(broker, topics) if hints else set()
    endpoints = node_endpoints(broker, ctx, leaders) if leaders else []
    return WireResponse(
        encode_fetch_response(ctx.correlation_id, ctx.api_version, int(error), topics, session_id, endpoints)
    )


def _name_leaders(broker: BrokerService, topics: list[TopicRead]) -> set[int]:
    """Name the current leader of each partition refused for want of leadership or for a stale
    epoch (KIP-951); returns their node ids."""
    named: set[int] = set()
    for topic in topics:
        if topic.topic is None:
            continue
        for read in topic.partitions:
            if read.error_code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
                read.current_leader = broker.leadership.leader(topic.topic.name, read.partition_index)
                named.add(read.current_leader[0])
    return named
