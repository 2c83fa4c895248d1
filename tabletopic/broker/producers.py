"""Idempotent producers: producer id allocation and per-partition sequence checks.

For each (stream, producer id) the broker remembers the epoch, the last sequence appended and
the last five batches (a producer has at most five requests in flight), which is what Kafka keeps
to answer a retried batch with its original offset instead of appending it twice.

Durability: the state of every stream is snapshotted to the metadata database every
``producer.state.snapshot.interval.ms`` together with the stream offset it covers; on start the
snapshot is loaded and the batches appended after it are replayed from the stream (headers only),
so the state after a crash is exactly what the acknowledged batches imply.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.broker.topics import producer_snapshots_table
from tabletopic.ids import ProducerEpoch
from tabletopic.records.header import NO_PRODUCER_ID, BatchHeader, validate_batches
from tabletopic.s3stream.streams import PendingAppend, StreamError, StreamStore, read_to_end
from tabletopic.tasks import gather_at_most

log = logging.getLogger(__name__)

MAX_CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1
REPLAY_CHUNK_BYTES = 4 << 20
REPLAY_CONCURRENCY = 16  # stream tails replayed at once when leadership is gained (x 4 MiB chunks)
# How long a batch refused here as "not the leader" explains a gap in its producer's sequences.
REFUSED_MEMORY_S = 30.0
MAX_REFUSED_PRODUCERS = 10_000  # (stream, producer) pairs remembered; memory stays bounded


@dataclass(slots=True)
class CachedBatch:
    first_sequence: int
    last_sequence: int
    # Resolved with the base offset once the append is acknowledged; a retry arriving while the
    # original is still being appended waits on it.
    base_offset: asyncio.Future[int] | int
    # The store's acknowledgement of a reserved batch, set as soon as it has offsets: it may fail
    # before the appending task learns of it (see PendingAppend).
    append: PendingAppend | None = None


@dataclass(slots=True)
class ProducerEntry:
    epoch: ProducerEpoch
    # The sequence the producer's next batch must follow (-1: it must start at 0), counting batches
    # reserved but still being appended.
    last_sequence: int
    # Only acknowledged batches: what a snapshot may record, and what ``last_sequence`` falls back
    # to when every batch since has failed. Before the first acknowledgement of an epoch it is the
    # sequence before the epoch's first batch seen here (-1 after a bump), never "unknown".
    committed_sequence: int = -1
    batches: collections.deque[CachedBatch] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_CACHED_BATCHES)
    )
    last_seen: float = field(default_factory=time.monotonic)  # for expiring idle producers


@dataclass(slots=True)  # not frozen: one per produced batch, and a frozen __init__ costs 3x
class SequenceCheck:
    """Outcome of checking one batch: accept (``reservation`` set), duplicate of an earlier batch
    (``duplicate`` set) or an error code."""

    error_code: ErrorCode = ErrorCode.none
    message: str = ""
    duplicate: CachedBatch | None = None
    reservation: CachedBatch | None = None


def next_sequence(sequence: int, count: int = 1) -> int:
    """Sequences wrap from INT32_MAX to 0."""
    return (sequence + count) % (INT32_MAX + 1)


class ProducerStates:
    """Sequence state of every stream; checks happen before the append, commits after it."""

    def __init__(self, engine: Engine, store: StreamStore) -> None:
        self._engine = engine
        self._store = store
        self._streams: dict[int, dict[int, ProducerEntry]] = {}
        self._covered: dict[int, int] = {}  # stream -> offset the in-memory state covers up to
        self._dirty: set[int] = set()
        self._turns: dict[int, asyncio.Lock] = {}
        # (stream, producer id) -> {base sequence: when}: batches refused because this broker did
        # not lead the stream's partition (yet). Kept apart from the streams' state, which gaining
        # the partition resets.
        self._refused: dict[tuple[int, int], dict[int, float]] = {}

    def ordering(self, stream_id: int) -> asyncio.Lock:
        """The lock a produce holds from its first await until its batches have offsets, so the
        batches of a stream are checked and appended in the order the requests arrived (Kafka
        handles a connection's requests one at a time). The acknowledgement is awaited outside
        it: appends stay pipelined."""
        lock = self._turns.get(stream_id)
        if lock is None:
            lock = self._turns[stream_id] = asyncio.Lock()
        return lock

    # --- the produce path --------------------------------------------------------------------
    def check(self, stream_id: int, batch: BatchHeader) -> SequenceCheck:
        """Check a batch's producer id, epoch and sequence and reserve its sequence range."""
        producer_id = batch.producer_id
        if producer_id == NO_PRODUCER_ID or batch.base_sequence < 0:
            return SequenceCheck()
        producers = self._streams.setdefault(stream_id, {})
        entry = producers.get(producer_id)
        first, last = batch.base_sequence, next_sequence(batch.base_sequence, batch.record_count - 1)
        if entry is None or batch.producer_epoch > entry.epoch:
            if entry is not None and first != 0:
                return SequenceCheck(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {producer_id} epoch {batch.producer_epoch} must start at sequence 0",
                )
            # From here on the sequence is known: were this first batch to fail, its retry must
            # come before anything later (see _follow_newest).
            entry = ProducerEntry(
                ProducerEpoch(batch.producer_epoch), last_sequence=first - 1, committed_sequence=first - 1
            )
            producers[producer_id] = entry
        elif batch.producer_epoch < entry.epoch:
            return SequenceCheck(
                ErrorCode.invalid_producer_epoch,
                f"producer {producer_id} epoch {batch.producer_epoch} is older than {entry.epoch}",
            )
        else:
            _forget_failed(entry)
            for cached in entry.batches:
                if cached.first_sequence == first and cached.last_sequence == last:
                    return SequenceCheck(duplicate=cached)
            expected = next_sequence(entry.last_sequence)
            if first != expected:
                if self._refused_here(stream_id, producer_id, expected):
                    return SequenceCheck(
                        ErrorCode.not_leader_or_follower,
                        f"producer {producer_id} sent sequence {first} before {expected}, which this "
                        "broker refused while it did not lead the partition yet: send that one first",
                    )
                # Also for a sequence older than every cached batch, as Kafka answers: never
                # DUPLICATE_SEQUENCE_NUMBER, which librdkafka takes for "delivered" (were this state
                # ever behind the log, the batch would be reported written and be lost).
                return SequenceCheck(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {producer_id} sent sequence {first}, expected {expected}",
                )
        entry.last_seen = time.monotonic()
        loop = asyncio.get_running_loop()
        reservation = CachedBatch(first, last, loop.create_future())
        entry.batches.append(reservation)
        entry.last_sequence = last
        return SequenceCheck(reservation=reservation)

    def committed(
        self, stream_id: int, producer_id: int, reservation: CachedBatch, base_offset: int, next_offset: int
    ) -> None:
        entry = self._streams.get(stream_id, {}).get(producer_id)
        # Only the entry's own batches: a fenced instance's append (an older epoch, same producer
        # id) that completes after the new epoch began must not pass its sequence to the new one.
        if entry is not None and any(cached is reservation for cached in entry.batches):
            last = reservation.last_sequence
            if entry.committed_sequence < 0 or _sequence_before(entry.committed_sequence, last):
                # Never backwards: acknowledgements that come out of order must not make a snapshot
                # claim an older sequence at a coverage offset past a newer batch.
                entry.committed_sequence = last
        future = reservation.base_offset
        reservation.base_offset = base_offset
        reservation.append = None
        if isinstance(future, asyncio.Future) and not future.done():
            future.set_result(base_offset)
        self._covered[stream_id] = max(self._covered.get(stream_id, 0), next_offset)
        self._dirty.add(stream_id)

    def failed(self, stream_id: int, producer_id: int, reservation: CachedBatch, exc: BaseException) -> None:
        """Undo a reservation whose append failed so the producer's retry is accepted."""
        future = reservation.base_offset
        if isinstance(future, asyncio.Future) and not future.done():
            future.set_exception(exc)
            future.exception()  # retrieved: waiters see it, nobody else must log it
        entry = self._streams.get(stream_id, {}).get(producer_id)
        if entry is None:
            return
        if reservation not in entry.batches:
            return
        entry.batches.remove(reservation)
        _follow_newest(entry)

    def note_refused(self, stream_id: int, headers: Sequence[BatchHeader]) -> None:
        """These batches were refused NOT_LEADER_OR_FOLLOWER: this broker did not lead the partition
        (yet). Their producer resends them; a later batch of it that arrives first is answered
        NOT_LEADER_OR_FOLLOWER too (see :meth:`check`), not OUT_OF_ORDER_SEQUENCE_NUMBER. librdkafka
        takes the latter, behind a failed request, for sequences lost: it bumps the producer's
        epoch and numbers every unacknowledged batch again, and a batch whose first send reached
        the failed leader's log is then written a second time (a kill -9 fault run traced this)."""
        now = time.monotonic()
        for header in headers:
            if header.producer_id == NO_PRODUCER_ID or header.base_sequence < 0:
                continue
            if len(self._refused) >= MAX_REFUSED_PRODUCERS:
                self._forget_refusals(now)
            refused = self._refused.setdefault((stream_id, header.producer_id), {})
            refused[header.base_sequence] = now

    def _refused_here(self, stream_id: int, producer_id: int, sequence: int) -> bool:
        refused = self._refused.get((stream_id, producer_id))
        at = None if refused is None else refused.get(sequence)
        return at is not None and time.monotonic() - at < REFUSED_MEMORY_S

    def _forget_refusals(self, now: float) -> None:
        """Drop refusals older than :data:`REFUSED_MEMORY_S` (all of them if none is)."""
        cutoff = now - REFUSED_MEMORY_S
        for key, refused in list(self._refused.items()):
            for sequence in [s for s, at in refused.items() if at < cutoff]:
                del refused[sequence]
            if not refused:
                del self._refused[key]
        if len(self._refused) >= MAX_REFUSED_PRODUCERS:
            self._refused.clear()

    def note_append(self, stream_id: int, next_offset: int) -> None:
        """A batch without producer id was appended: the snapshot coverage moves on (and is
        written, so a restart never replays a stream that has no idempotent producers)."""
        self._covered[stream_id] = max(self._covered.get(stream_id, 0), next_offset)
        self._dirty.add(stream_id)

    def expire(self, idle_seconds: float) -> int:
        """Forget producers that have not written for ``idle_seconds`` (Kafka's
        ``producer.id.expiration.ms``), so state does not grow with every producer ever seen."""
        cutoff = time.monotonic() - idle_seconds
        expired = 0
        for stream_id, producers in self._streams.items():
            stale = [pid for pid, entry in producers.items() if entry.last_seen < cutoff]
            for pid in stale:
                del producers[pid]
            if stale:
                expired += len(stale)
                self._dirty.add(stream_id)
        return expired

    def active(self, stream_id: int) -> list[tuple[int, ProducerEpoch, int]]:
        """``(producer id, epoch, last acknowledged sequence)`` of the producers of a stream."""
        return [
            (pid, entry.epoch, entry.committed_sequence)
            for pid, entry in sorted(self._streams.get(stream_id, {}).items())
        ]

    def forget_stream(self, stream_id: int) -> None:
        self._streams.pop(stream_id, None)
        self._covered.pop(stream_id, None)
        self._dirty.discard(stream_id)
        lock = self._turns.get(stream_id)
        if lock is not None and not lock.locked():
            del self._turns[stream_id]

    # --- durability ----------------------------------------------------------------------------
    def _apply_replayed(self, stream_id: int, header: BatchHeader, base_offset: int) -> None:
        if header.producer_id == NO_PRODUCER_ID or header.base_sequence < 0:
            return
        producers = self._streams.setdefault(stream_id, {})
        entry = producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = ProducerEntry(ProducerEpoch(header.producer_epoch), -1)
            producers[header.producer_id] = entry
        last = next_sequence(header.base_sequence, header.record_count - 1)
        entry.last_sequence = entry.committed_sequence = last
        entry.batches.append(CachedBatch(header.base_sequence, last, base_offset))

    async def recover(self, stream_ids: list[int]) -> None:
        """Load snapshots, then replay the stream tails written after them: several streams at
        once (a new leader gaining thousands of partitions must not read their tails one after
        another), at most :data:`REPLAY_CONCURRENCY` at a time so memory stays bounded."""
        snapshots = await asyncio.to_thread(self._read_snapshots)
        replays = [functools.partial(self._replay, sid, snapshots.get(sid)) for sid in stream_ids]
        replayed = sum(await gather_at_most(REPLAY_CONCURRENCY, replays))
        if replayed:
            log.info("replayed %d batches to rebuild idempotent producer state", replayed)

    async def _replay(self, stream_id: int, snapshot: tuple[int, str] | None) -> int:
        """Rebuild one stream's producer state; returns the batches replayed."""
        start = 0
        if snapshot is not None:
            start, state = snapshot
            self._streams[stream_id] = _decode_state(state)
        try:
            info = self._store.stream_info(stream_id)
        except StreamError:
            return 0
        replayed = 0
        # Serving with a state that misses acknowledged batches would refuse the producer's next
        # one (OUT_OF_ORDER_SEQUENCE_NUMBER, fatal for librdkafka): a short read raises.
        async for stored in read_to_end(self._store, stream_id, start, REPLAY_CHUNK_BYTES):
            try:
                (header,) = validate_batches(stored.payload, verify_crc=False)
            except ValueError:  # a RecordBatchError, or not exactly one batch
                continue
            self._apply_replayed(stream_id, header, stored.base_offset)
            replayed += 1
        self._covered[stream_id] = info.end_offset
        return replayed

    def _read_snapshots(self) -> dict[int, tuple[int, str]]:
        with self._engine.begin() as conn:
            return {
                int(row.stream_id): (int(row.end_offset), row.state)
                for row in conn.execute(sa.select(producer_snapshots_table))
            }

    async def snapshot(self) -> None:
        """Write the state of every stream that changed since the last snapshot."""
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        rows = [
            {
                "stream_id": s,
                "end_offset": self._covered.get(s, 0),
                "state": _encode_state(self._streams.get(s, {})),
            }
            for s in dirty
        ]

        def write() -> None:
            # Never replace a snapshot with one covering less: a deposed leader's last write (at
            # release, or a periodic one) may land after its successor's. Older yet consistent, it
            # would only lengthen replays, but once retention trims past its coverage the producers
            # of the trimmed part would come back with old sequences.
            table = producer_snapshots_table
            with self._engine.begin() as conn:
                database.upsert(conn, table, rows, newer=table.c.end_offset)

        try:
            await asyncio.to_thread(write)
        except Exception:
            self._dirty |= dirty
            raise


def _forget_failed(entry: ProducerEntry) -> None:
    """Drop reservations whose appends the store has already failed, before their tasks report it.

    Counting them as written would accept the producer's next batch past a gap: the object WAL
    fails every append behind a failed upload and rewinds the stream, so that next batch lands
    where the failed one was, is acknowledged, and librdkafka then takes the failed batch, which
    it sent earlier, as delivered (an "implicit ack") although it was never written."""
    failed = [c for c in entry.batches if c.append is not None and c.append.failed()]
    if not failed:
        return
    for cached in failed:
        entry.batches.remove(cached)
    _follow_newest(entry)


def _follow_newest(entry: ProducerEntry) -> None:
    """The next expected sequence follows the newest batch still written or being written, in
    whatever order the failures of several in-flight batches are reported: undoing only the newest
    reservation left the sequence of failed batches as "written", so their retries were refused
    while nothing of them was in the log.

    With nothing of the epoch written it falls back to the epoch's first sequence, never to "any":
    after the first batch of a bumped epoch (sequence 0) failed, a batch at sequence 1 already in
    flight was taken, appended where the failed one would have been and acknowledged, and
    librdkafka then counted the failed batch as delivered (an "implicit ack"): a record lost."""
    entry.last_sequence = entry.batches[-1].last_sequence if entry.batches else entry.committed_sequence


def _sequence_before(a: int, b: int) -> bool:
    """``a`` comes before ``b`` in wrapping sequence order (within half the range)."""
    return a != b and ((b - a) % (INT32_MAX + 1)) < (INT32_MAX // 2)


def _encode_state(producers: dict[int, ProducerEntry]) -> str:
    return json.dumps(
        {
            str(pid): [
                entry.epoch,
                entry.committed_sequence,
                [
                    [b.first_sequence, b.last_sequence, b.base_offset]
                    for b in entry.batches
                    if isinstance(b.base_offset, int)
                ],
            ]
            for pid, entry in producers.items()
        },
        separators=(",", ":"),
    )


def _decode_state(text: str) -> dict[int, ProducerEntry]:
    result: dict[int, ProducerEntry] = {}
    for pid, (epoch, last, batches) in json.loads(text).items():
        entry = ProducerEntry(ProducerEpoch(int(epoch)), int(last), int(last))
        for first_seq, last_seq, offset in batches:
            entry.batches.append(CachedBatch(int(first_seq), int(last_seq), int(offset)))
        result[int(pid)] = entry
    return result
