"""Background retention: ``retention.ms`` and ``retention.bytes`` move each partition's log start
offset forward (``StreamStore.trim``); s3stream's compaction reclaims the space.

Trims happen at batch boundaries, like Kafka's at segment boundaries, so a consumer never sees half
a batch disappear.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from tabletopic.broker import settings
from tabletopic.broker.protocol.records import max_timestamp_of
from tabletopic.s3stream.api import StreamError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)

SCAN_CHUNK_BYTES = 8 << 20


class RetentionTask:
    def __init__(self, broker: BrokerService) -> None:
        self._broker = broker

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._broker.broker_config(settings.RETENTION_CHECK_INTERVAL_MS.name) / 1000)
            try:
                await self.enforce_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("retention pass failed; retrying next interval")

    async def enforce_all(self) -> int:
        """One pass over every partition; returns how many partitions were trimmed."""
        trimmed = 0
        now = int(time.time() * 1000)
        for topic in self._broker.topics.all():
            if "delete" not in self._broker.topic_config(topic, "cleanup.policy"):
                continue
            retention_ms = int(self._broker.topic_config(topic, "retention.ms"))
            retention_bytes = int(self._broker.topic_config(topic, "retention.bytes"))
            if retention_ms < 0 and retention_bytes < 0:
                continue
            for stream_id in list(topic.streams):
                try:
                    new_start = await self._new_start(stream_id, now, retention_ms, retention_bytes)
                    if new_start is not None:
                        await self._broker.store.trim(stream_id, new_start)
                        trimmed += 1
                        log.info(
                            "retention trimmed %s stream %d to offset %d", topic.name, stream_id, new_start
                        )
                except StreamError as exc:
                    log.warning("retention skipped stream %d: %s", stream_id, exc)
        return trimmed

    async def _new_start(
        self, stream_id: int, now: int, retention_ms: int, retention_bytes: int
    ) -> int | None:
        store = self._broker.store
        info = store.stream_info(stream_id)
        if info.start_offset >= info.end_offset:
            return None
        # Walk the batches once, remembering each one's base offset and size.
        batches: list[tuple[int, int, int]] = []  # (base offset, size, max timestamp)
        offset = info.start_offset
        while offset < info.end_offset:
            chunk = await store.fetch(stream_id, offset, SCAN_CHUNK_BYTES)
            if not chunk:
                break
            for batch in chunk:
                if batch.next_offset > offset:
                    batches.append((batch.base_offset, len(batch.payload), max_timestamp_of(batch.payload)))
            offset = chunk[-1].next_offset
            if retention_bytes < 0 and batches and batches[-1][2] >= now - retention_ms:
                break  # only time matters and we found the first batch to keep
        keep_from = info.start_offset
        if retention_ms >= 0:
            for base, _size, max_ts in batches:
                if max_ts >= now - retention_ms:
                    keep_from = max(keep_from, base)
                    break
            else:
                keep_from = max(keep_from, offset)
        if retention_bytes >= 0:
            total = sum(size for _, size, _ in batches)
            for base, size, _ in batches:
                if total <= retention_bytes:
                    keep_from = max(keep_from, base)
                    break
                total -= size
            else:
                keep_from = max(keep_from, offset)
        return keep_from if keep_from > info.start_offset else None
