"""Log compaction of ``cleanup.policy=compact`` topics (also ``compact,delete``).

Every ``log.cleaner.backoff.ms`` the cleaner looks at each compacted partition. It cleans one when
the share of records appended since its last cleaning reaches ``min.cleanable.dirty.ratio``, or when
the last cleaning is older than ``max.compaction.lag.ms``. Cleaning rewrites the partition's data in
object storage through :meth:`~tabletopic.s3stream.streams.StreamStore.rewrite`, which swaps old
objects for new ones in one metadata transaction (a kill -9 leaves all old or all new data) and is
rate-limited by ``s3stream.compaction.rate.bytes.per.second``. Data still in the WAL is the dirty
head and is left alone. In a cluster each partition is cleaned by its leader, whose rewrite commits
only while it still holds the partition's stream with its epoch.

What one cleaning keeps, as Kafka's cleaner:

- Only the *cleanable* prefix is compacted: batches below the last stable offset, neither
  transactional nor control, whose newest record is older than ``min.compaction.lag.ms``; the first
  batch that is not cleanable ends the prefix.
- In it, a record survives when it is the latest of its key in the prefix (so the latest value of a
  key is never lost: a newer one later in the log is kept in any case). A tombstone (null value)
  survives ``delete.retention.ms`` past its timestamp, then goes.
- Offsets never move: a compacted batch keeps its base offset and span with fewer records. A batch
  whose every record would go keeps its last one (an out-of-date value, harmless), because an empty
  batch would leave some consumers fetching the same offset forever.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from tabletopic.broker.ports import OpenTransactions, PartitionHost
from tabletopic.records.columns import DecodedRecords, append_records
from tabletopic.records.compression import decompress
from tabletopic.records.encoder import Record, build_batch
from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import HEADER_SIZE, BatchHeader, parse_stored_header
from tabletopic.s3stream.streams import StoredBatch, StreamError
from tabletopic.tasks import run_every

log = logging.getLogger(__name__)

BACKOFF_KEY = "log.cleaner.backoff.ms"


@dataclass(frozen=True, slots=True)
class CleaningRules:
    cleanable_end: int  # the last stable offset: nothing at or past it is compacted
    now_ms: int
    min_lag_ms: int
    delete_retention_ms: int


@dataclass(slots=True)
class CleaningStats:
    batches: int = 0
    records_before: int = 0
    records_after: int = 0


def _decode(batch: StoredBatch) -> tuple[BatchHeader, DecodedRecords]:
    header = parse_stored_header(batch.payload)
    holder = DecodedRecords(0)
    data = decompress(header.compression, memoryview(batch.payload)[HEADER_SIZE:])
    end = batch.base_offset + header.last_offset_delta + 1
    append_records(holder, data, header, batch.base_offset, batch.base_offset, end)
    return header, holder


def compact_batches(
    batches: list[StoredBatch], rules: CleaningRules, stats: CleaningStats | None = None
) -> list[StoredBatch]:
    """The batches of one partition (offset order) after one cleaning (see the module docstring)."""
    stats = stats if stats is not None else CleaningStats()
    cleanable: list[tuple[int, BatchHeader, DecodedRecords]] = []
    for index, batch in enumerate(batches):
        if batch.next_offset > rules.cleanable_end:
            break
        try:
            header, records = _decode(batch)
        except RecordBatchError:
            break
        if (
            header.is_transactional
            or header.is_control
            or header.max_timestamp > rules.now_ms - rules.min_lag_ms
        ):
            break
        cleanable.append((index, header, records))
    latest: dict[bytes, int] = {}
    for _, _, records in cleanable:
        for offset, key in zip(records.offsets, records.keys, strict=True):
            if key is not None:
                latest[key] = offset
    result = list(batches)
    for index, header, records in cleanable:
        batch = batches[index]
        keep = [
            i
            for i, (offset, key, value, stamp) in enumerate(
                zip(records.offsets, records.keys, records.values, records.timestamps, strict=True)
            )
            if key is None
            or (
                latest.get(key) == offset
                and not (value is None and rules.now_ms - stamp > rules.delete_retention_ms)
            )
        ]
        stats.batches += 1
        stats.records_before += len(records.offsets)
        if len(keep) == len(records.offsets):
            stats.records_after += len(keep)
            continue
        keep = keep or [len(records.offsets) - 1]
        stats.records_after += len(keep)
        payload = build_batch(
            [
                Record(records.keys[i], records.values[i], records.headers[i], records.timestamps[i])
                for i in keep
            ],
            offset_deltas=[records.offsets[i] - batch.base_offset for i in keep],
            last_offset_delta=header.last_offset_delta,
            log_append_time=header.log_append_time,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
        )
        result[index] = StoredBatch(batch.base_offset, batch.record_count, payload)
    return result


class LogCleaner:
    """The background task; :meth:`clean` runs one partition now (tests, the bench).

    Args:
        broker: the topics, their leaders and the store.
        open_transactions: where the last stable offset comes from (nothing past it is cleaned).
    """

    def __init__(self, broker: PartitionHost, open_transactions: OpenTransactions) -> None:
        self._broker = broker
        self._open_transactions = open_transactions
        self._cleaned: dict[int, tuple[int, float]] = {}  # stream -> (end offset, monotonic time)

    async def run(self) -> None:
        await run_every(
            lambda: int(self._broker.broker_config(BACKOFF_KEY)) / 1000, self.clean_due, "log cleaning", log
        )

    async def clean_due(self) -> int:
        """Clean every compacted partition that is due; returns the bytes rewritten."""
        rewritten = 0
        for topic in self._broker.topics.all():
            if "compact" not in self._broker.topic_config(topic, "cleanup.policy"):
                continue
            ratio = float(self._broker.topic_config(topic, "min.cleanable.dirty.ratio"))
            max_lag_s = int(self._broker.topic_config(topic, "max.compaction.lag.ms")) / 1000
            for index, stream_id in enumerate(topic.streams):
                if not self._broker.leadership.leads(topic.name, index):
                    continue  # a cluster's partition is cleaned by its leader
                try:
                    info = self._broker.store.stream_info(stream_id)
                except StreamError:
                    continue
                cleaned_end, cleaned_at = self._cleaned.get(stream_id, (info.start_offset, time.monotonic()))
                self._cleaned.setdefault(stream_id, (cleaned_end, cleaned_at))
                total = info.end_offset - info.start_offset
                dirty = info.end_offset - max(cleaned_end, info.start_offset)
                overdue = dirty > 0 and time.monotonic() - cleaned_at > max_lag_s
                if total > 0 and dirty > 0 and (dirty / total >= ratio or overdue):
                    rewritten += await self.clean(topic.name, stream_id)
        return rewritten

    async def clean(self, topic_name: str, stream_id: int) -> int:
        topic = self._broker.topics.get(topic_name)
        if topic is None:
            return 0
        info = self._broker.store.stream_info(stream_id)
        rules = CleaningRules(
            cleanable_end=self._open_transactions.last_stable_offset(stream_id, info.end_offset),
            now_ms=int(time.time() * 1000),
            min_lag_ms=int(self._broker.topic_config(topic, "min.compaction.lag.ms")),
            delete_retention_ms=int(self._broker.topic_config(topic, "delete.retention.ms")),
        )
        stats = CleaningStats()
        try:
            await self._broker.store.flush([stream_id])
            rewritten = await self._broker.store.rewrite(
                stream_id, lambda batches: compact_batches(batches, rules, stats)
            )
        except StreamError as exc:
            log.warning("cleaning %s (stream %d) failed: %s", topic_name, stream_id, exc)
            return 0
        if not rewritten:
            # The rewrite's swap lost a race with another compaction or upload (the store logs it):
            # nothing was cleaned, so the partition stays dirty and the next pass tries again.
            # Recorded as cleaned, it would wait for new data that may never come.
            return 0
        self._cleaned[stream_id] = (info.end_offset, time.monotonic())
        if stats.records_before != stats.records_after:
            log.info(
                "cleaned %s (stream %d): %d of %d records kept, %d bytes rewritten",
                topic_name,
                stream_id,
                stats.records_after,
                stats.records_before,
                rewritten,
            )
        return rewritten
