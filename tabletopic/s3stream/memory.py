"""An in-memory :class:`~tabletopic.s3stream.streams.StreamStore` for unit tests of the layers above.

Not durable and without object slices: it exists so the broker's handlers can be tested in
milliseconds. The feature tests run against the real engine. It answers fetches and long polls with
the engine's own code (:mod:`tabletopic.s3stream.semantics`), so the layers above see the same
batches and wake-ups from both.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable

from tabletopic.s3stream.epochs import NO_EPOCHS, EpochHistory
from tabletopic.s3stream.semantics import DataWaiters, check_rewrite, take_batches, watch_streams
from tabletopic.s3stream.streams import (
    ACKNOWLEDGED,
    BatchTransform,
    DataWatch,
    ObjectSlice,
    OffsetOutOfRange,
    PendingAppend,
    StoredBatch,
    StreamInfo,
    StreamNotFound,
    kept_payload,
)


class _MemoryStream:
    __slots__ = ("bases", "batches", "end", "start", "waiters")

    def __init__(self) -> None:
        self.batches: list[StoredBatch] = []
        self.bases: list[int] = []
        self.start = 0
        self.end = 0
        self.waiters = DataWaiters()


class MemoryStreamStore:
    def __init__(self) -> None:
        self._streams: dict[int, _MemoryStream] = {}
        self._ids = itertools.count(1)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        for stream in self._streams.values():
            stream.waiters.wake_all()

    def _get(self, stream_id: int) -> _MemoryStream:
        try:
            return self._streams[stream_id]
        except KeyError:
            raise StreamNotFound(f"stream {stream_id} does not exist") from None

    async def rewrite(self, stream_id: int, transform: BatchTransform) -> int:
        """Everything counts as "in object storage" here: the whole stream is rewritten."""
        stream = self._get(stream_id)
        before = sum(len(b.payload) for b in stream.batches)
        if stream.batches:
            stream.batches = check_rewrite(stream.batches, transform(list(stream.batches)))
        return before

    async def create_stream(self) -> int:
        stream_id = next(self._ids)
        self._streams[stream_id] = _MemoryStream()
        return stream_id

    async def create_streams(self, count: int) -> list[int]:
        return [await self.create_stream() for _ in range(count)]

    async def delete_stream(self, stream_id: int) -> None:
        self._get(stream_id)
        self._streams.pop(stream_id).waiters.wake_all()  # as the engine: its long polls end now

    def stream_info(self, stream_id: int) -> StreamInfo:
        stream = self._get(stream_id)
        return StreamInfo(stream_id, stream.start, stream.end)

    def epochs(self, stream_id: int) -> EpochHistory:
        """Same as :meth:`S3StreamStore.epochs`: streams here are never opened with an epoch."""
        self._get(stream_id)
        return NO_EPOCHS

    async def append(self, stream_id: int, payload: bytes | memoryview, record_count: int) -> int:
        base, _ = self.start_append(stream_id, payload, record_count)
        return base

    async def wait_for_room(self) -> None:
        """Same as :meth:`S3StreamStore.wait_for_room`: memory is never full."""

    def start_append(
        self, stream_id: int, payload: bytes | memoryview, record_count: int, crc: int | None = None
    ) -> tuple[int, PendingAppend]:
        """Same as :meth:`S3StreamStore.start_append`; acknowledged at once."""
        if record_count <= 0:
            raise ValueError("record_count must be positive")
        stream = self._get(stream_id)
        base = stream.end
        stream.batches.append(StoredBatch(base, record_count, kept_payload(payload), crc))
        stream.bases.append(base)
        stream.end = base + record_count
        stream.waiters.advance(stream.end)
        return base, ACKNOWLEDGED

    async def append_many(self, items: list[tuple[int, bytes | memoryview, int]]) -> list[int]:
        """Same as :meth:`S3StreamStore.append_many`: all items validated first, one call."""
        for stream_id, _, count in items:
            self._get(stream_id)
            if count <= 0:
                raise ValueError("record_count must be positive")
        return [await self.append(sid, payload, count) for sid, payload, count in items]

    async def fetch(
        self, stream_id: int, start_offset: int, max_bytes: int, end_offset: int | None = None
    ) -> list[StoredBatch]:
        stream = self._get(stream_id)
        if start_offset < stream.start or start_offset > stream.end:
            raise OffsetOutOfRange(stream_id, start_offset, stream.start, stream.end)
        limit = stream.end if end_offset is None else min(end_offset, stream.end)
        index = max(bisect.bisect_right(stream.bases, start_offset) - 1, 0)
        result: list[StoredBatch] = []
        take_batches(stream.batches, index, start_offset, limit, max_bytes, result, 0)
        return result

    async def trim(self, stream_id: int, new_start_offset: int) -> None:
        stream = self._get(stream_id)
        if new_start_offset <= stream.start:
            return
        stream.start = min(new_start_offset, stream.end)
        keep = max(bisect.bisect_right(stream.bases, stream.start) - 1, 0)
        del stream.batches[:keep]
        del stream.bases[:keep]

    def wait_for_data(self, wanted: Iterable[tuple[int, int]]) -> DataWatch:
        return watch_streams(wanted, self._waiters)

    def _waiters(self, stream_id: int) -> tuple[DataWaiters, int] | None:
        stream = self._streams.get(stream_id)
        return None if stream is None else (stream.waiters, stream.end)

    async def flush(self, stream_ids: Iterable[int] | None = None) -> None:
        return None

    def not_uploaded(self, stream_ids: Iterable[int]) -> list[int]:
        return []

    async def refresh(self, stream_ids: Iterable[int]) -> None:
        return None

    async def locate(self, stream_id: int, start_offset: int, end_offset: int) -> list[ObjectSlice]:
        stream = self._get(stream_id)
        raise OffsetOutOfRange(stream_id, start_offset, stream.end, stream.end)
