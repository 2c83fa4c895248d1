"""Background retention: ``retention.ms`` and ``retention.bytes`` move each partition's log start
offset forward (``StreamStore.trim``); s3stream's compaction reclaims the space.

Each pass must not re-read whole partitions (a 100 GB partition would be read from object storage
every interval), so the task keeps, per stream, an index of *runs*: consecutive batches read in one
fetch, with their total size and newest timestamp. A pass only reads what was appended since the
previous one. Trims happen at run boundaries, the way Kafka trims at segment boundaries: a run is
dropped only when all of it is beyond the limits, so retention never removes too much.

In a cluster a partition is trimmed by its leader (a trim is checked against the stream's owner and
epoch), so a pass skips the partitions other brokers lead, and a stream with nothing in it (never
written, or emptied) costs no read. What was skipped is said in one line at most every
``SKIP_LOG_INTERVAL_S``: a warning per partition per pass made 5,000 lines a pass at 10,000
partitions.
"""

from __future__ import annotations

import collections
import enum
import logging
import time
from dataclasses import dataclass, field

from tabletopic.broker import settings
from tabletopic.broker.ports import PartitionHost
from tabletopic.log_limit import RateLimitedLog
from tabletopic.records.header import max_timestamp_of
from tabletopic.s3stream.streams import StreamError, StreamNotFound
from tabletopic.tasks import run_every

log = logging.getLogger(__name__)

RUN_BYTES = 8 << 20
SKIP_LOG_INTERVAL_S = 600.0


class CleanupPolicy(enum.StrEnum):
    """The values of a topic's ``cleanup.policy`` (a comma-separated list of them)."""

    DELETE = "delete"  # retention.ms / retention.bytes trim the log
    COMPACT = "compact"  # the log cleaner keeps the latest value per key (broker/log_cleaner.py)


def cleanup_policies(value: str) -> set[CleanupPolicy]:
    """The policies a ``cleanup.policy`` value names (parts that name none are ignored)."""
    parts = {part.strip() for part in value.split(",")}
    return {policy for policy in CleanupPolicy if policy in parts}


@dataclass(slots=True)
class Run:
    """Batches ``[base_offset, next_offset)`` holding ``size`` bytes, newest record at ``max_timestamp``."""

    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int


@dataclass(slots=True)
class StreamIndex:
    runs: collections.deque[Run] = field(default_factory=collections.deque)
    scanned_to: int = 0

    @property
    def size(self) -> int:
        return sum(run.size for run in self.runs)


class RetentionTask:
    def __init__(self, broker: PartitionHost, run_bytes: int = RUN_BYTES) -> None:
        self._broker = broker
        self._indexes: dict[int, StreamIndex] = {}
        # Granularity of trims; tests lower it to one batch per run.
        self.run_bytes = run_bytes
        self.skip_log = RateLimitedLog(log, SKIP_LOG_INTERVAL_S)

    async def run(self) -> None:
        await run_every(
            lambda: self._broker.broker_config(settings.RETENTION_CHECK_INTERVAL_MS.name) / 1000,
            self.enforce_all,
            "retention",
            log,
        )

    async def enforce_all(self) -> int:
        """One pass over every partition this broker leads; returns how many were trimmed."""
        trimmed = led_elsewhere = not_here = 0
        now = int(time.time() * 1000)
        live: set[int] = set()
        leads = self._broker.leadership.leads
        store = self._broker.store
        for topic in self._broker.topics.all():
            live.update(topic.streams)
            if CleanupPolicy.DELETE not in cleanup_policies(
                self._broker.topic_config(topic, "cleanup.policy")
            ):
                continue
            retention_ms = int(self._broker.topic_config(topic, "retention.ms"))
            retention_bytes = int(self._broker.topic_config(topic, "retention.bytes"))
            if retention_ms < 0 and retention_bytes < 0:
                continue
            for partition, stream_id in enumerate(list(topic.streams)):
                if not leads(topic.name, partition):
                    led_elsewhere += 1  # its leader trims it
                    continue
                try:
                    info = store.stream_info(stream_id)
                    if info.end_offset <= info.start_offset and stream_id not in self._indexes:
                        continue  # nothing written (or all of it trimmed): nothing to read
                    new_start = await self._new_start(stream_id, now, retention_ms, retention_bytes)
                    if new_start is not None:
                        await store.trim(stream_id, new_start)
                        trimmed += 1
                        log.info(
                            "retention trimmed %s (stream %d) to offset %d", topic.name, stream_id, new_start
                        )
                except StreamNotFound:
                    not_here += 1  # not opened here yet, or deleted meanwhile: the next pass sees
                except StreamError as exc:
                    log.warning("retention skipped stream %d: %s", stream_id, exc)
        for stream_id in set(self._indexes) - live:
            del self._indexes[stream_id]
        if not_here:
            self.skip_log.info(
                "skipped",
                "retention left out %d partitions whose streams this broker does not hold (yet); "
                "%d more are led by other brokers, which trim them",
                not_here,
                led_elsewhere,
            )
        return trimmed

    async def _index(self, stream_id: int) -> StreamIndex:
        """The stream's run index, extended with whatever was appended since the last pass."""
        store = self._broker.store
        info = store.stream_info(stream_id)
        index = self._indexes.setdefault(stream_id, StreamIndex(scanned_to=info.start_offset))
        while index.runs and index.runs[0].next_offset <= info.start_offset:
            index.runs.popleft()  # trimmed by someone else (DeleteRecords)
        index.scanned_to = max(index.scanned_to, info.start_offset)
        while index.scanned_to < info.end_offset:
            batches = await store.fetch(stream_id, index.scanned_to, self.run_bytes)
            batches = [b for b in batches if b.next_offset > index.scanned_to]
            if not batches:
                break
            index.runs.append(
                Run(
                    batches[0].base_offset,
                    batches[-1].next_offset,
                    sum(len(b.payload) for b in batches),
                    max(max_timestamp_of(b.payload) for b in batches),
                )
            )
            index.scanned_to = batches[-1].next_offset
        return index

    async def _new_start(
        self, stream_id: int, now: int, retention_ms: int, retention_bytes: int
    ) -> int | None:
        start = self._broker.store.stream_info(stream_id).start_offset
        index = await self._index(stream_id)
        drop = 0
        if retention_ms >= 0:
            while drop < len(index.runs) and index.runs[drop].max_timestamp < now - retention_ms:
                drop += 1
        if retention_bytes >= 0:
            total = index.size - sum(index.runs[i].size for i in range(drop))
            while drop < len(index.runs) and total > retention_bytes:
                total -= index.runs[drop].size
                drop += 1
        if drop == 0:
            return None
        new_start = index.runs[drop - 1].next_offset
        for _ in range(drop):
            index.runs.popleft()
        return new_start if new_start > start else None
