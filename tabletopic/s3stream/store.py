"""The S3Stream engine: :class:`S3StreamStore` implements :class:`~tabletopic.s3stream.streams.StreamStore`.

Write path. ``append`` assigns the offsets synchronously (so they follow call order per stream),
puts the batch in the LogCache's current block and then waits for durability, which is shared by
every append of the same moment:

- ``local`` WAL mode: the batch joins the WAL's current group; one fsync acknowledges the group.
  The block is uploaded later (size or time threshold) and the WAL segments it covers are deleted.
- ``object`` WAL mode: the block *is* the batch window; when it is sealed (time or size) it is
  uploaded and committed, and that commit acknowledges every append in it.

Offsets a stream has: ``next_end`` (assigned), ``confirmed_end`` (acknowledged; readers see up to
here), ``committed_end`` (in object storage, recorded in the metadata DB).

Read path. ``fetch`` serves from the LogCache when it holds the offset (always true for data not
yet uploaded), else from objects through the BlockCache, fetching whole blocks with readahead.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.s3stream.cache import Block, BlockCache, LogCache
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.db import RangeRow, StreamMetadata
from tabletopic.s3stream.metrics import StoreMetrics
from tabletopic.s3stream.objectstore import AsyncObjectStore, ObjectNotFound, ObjectStore
from tabletopic.s3stream.reader import ObjectReader
from tabletopic.s3stream.streams import (
    ObjectSlice,
    OffsetOutOfRange,
    StorageUnavailable,
    StoredBatch,
    StreamError,
    StreamInfo,
    StreamNotFound,
)
from tabletopic.s3stream.upload import UploadMixin
from tabletopic.s3stream.wal import Group, LocalWal, SharedFuture, WalCorruption

log = logging.getLogger(__name__)

T = TypeVar("T")


class StreamState:
    __slots__ = ("committed_end", "confirmed_end", "next_end", "range_starts", "ranges", "start", "waiters")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.committed_end = end
        self.confirmed_end = end
        self.next_end = end
        self.ranges: list[RangeRow] = []
        self.range_starts: list[int] = []
        self.waiters: list[tuple[int, asyncio.Future[None]]] = []

    def set_ranges(self, ranges: list[RangeRow]) -> None:
        ranges.sort(key=lambda r: r.start_offset)
        self.ranges = ranges
        self.range_starts = [r.start_offset for r in ranges]

    def add_range(self, rng: RangeRow) -> None:
        if self.ranges and rng.start_offset < self.ranges[-1].start_offset:
            self.set_ranges([*self.ranges, rng])
        else:
            self.ranges.append(rng)
            self.range_starts.append(rng.start_offset)


class S3StreamStore(UploadMixin):
    """A node's streams on object storage; see the module docstring for the design."""

    def __init__(
        self,
        settings: StoreSettings,
        engine: Engine,
        object_store: ObjectStore,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.meta = StreamMetadata(engine)
        self.objects = AsyncObjectStore(object_store, settings.object_threads)
        self.metrics = StoreMetrics(registry)
        self.log_cache = LogCache(settings.log_cache_bytes)
        self.block_cache = BlockCache(settings.block_cache_bytes)
        self._db_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="s3stream-db")
        self._streams: dict[int, StreamState] = {}
        self.reader = ObjectReader(self.objects, self.block_cache, self.metrics, settings.readahead_bytes)
        self._upload_queue: asyncio.Queue[Block] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._wal: LocalWal | None = None
        self._space_freed = asyncio.Event()
        self._pending_upload_bytes = 0  # object WAL: appended bytes whose batch is not committed
        # Held while the DB and the in-memory range index change together (upload commit) or while
        # compaction snapshots the DB, so compaction never sees an object the index lacks.
        self.commit_lock = asyncio.Lock()
        # Objects reserved by this process and not yet committed or abandoned: never garbage.
        self.inflight_objects: set[int] = set()
        self.upload_tasks: set[asyncio.Future[None]] = set()  # object WAL uploads in flight
        self._generation = 0
        self._closed = False
        self._started = False
        self.compactor: Any = None
        self.metrics.wal_bytes.set_function(lambda: float(self._wal.bytes_used if self._wal else 0))

    # Helpers ---------------------------------------------------------------------------------

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._db_executor, fn, *args)

    def _stream(self, stream_id: int) -> StreamState:
        state = self._streams.get(stream_id)
        if state is None:
            raise StreamNotFound(f"stream {stream_id} does not exist")
        return state

    # Life cycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await self._db(self.meta.migrate)
        await self.objects.check()
        streams = await self._db(self.meta.load_streams)
        self._streams = {sid: StreamState(start, end) for sid, (start, end) in streams.items()}
        by_stream: dict[int, list[RangeRow]] = {}
        for row in await self._db(self.meta.load_ranges, None):
            by_stream.setdefault(row.stream_id, []).append(row)
        for sid, rows in by_stream.items():
            if sid in self._streams:
                self._streams[sid].set_ranges(rows)
        self._tasks.append(asyncio.create_task(self._upload_loop(), name="s3stream-uploader"))
        if self.local_wal:
            await self._recover_wal()
        elif LocalWal.holds_data(self.settings.wal_dir):
            # Switched from local to object mode: acknowledged appends may still be in the old WAL.
            log.warning(
                "s3stream.wal.mode=object, but %s holds a local WAL: uploading it before starting",
                self.settings.wal_dir,
            )
            await self._recover_wal()
            assert self._wal is not None
            await self._wal.close()
            self._wal.remove_segments()
            self._wal = None
        from tabletopic.s3stream.compaction import Compactor

        self.compactor = Compactor(self)
        if self.settings.compaction_interval_ms > 0:
            self._tasks.append(asyncio.create_task(self.compactor.run_forever(), name="s3stream-compactor"))
        self._started = True
        log.info(
            "s3stream started: %d streams, WAL mode %s, objects in %s",
            len(self._streams),
            self.settings.wal_mode,
            self.objects.description,
        )

    async def _recover_wal(self) -> None:
        wal = self._wal = LocalWal(
            self.settings.wal_dir,
            self.settings.wal_segment_bytes,
            self._on_wal_commit,
            self.metrics.wal_fsync_seconds.observe,
        )
        records = await self._db(lambda: list(wal.replay()))
        replayed = 0
        for record in records:
            state = self._streams.get(record.stream_id)
            if state is None:  # deleted since
                continue
            if record.base_offset + record.record_count <= state.committed_end:
                continue  # uploaded before the crash
            if record.base_offset != state.next_end:
                raise WalCorruption(
                    f"WAL record of stream {record.stream_id} starts at offset {record.base_offset} but the "
                    f"stream ends at {state.next_end}: the WAL in {self.settings.wal_dir} does not match the "
                    f"metadata database"
                )
            batch = StoredBatch(record.base_offset, record.record_count, record.payload)
            self.log_cache.add(record.stream_id, batch)
            state.next_end = state.confirmed_end = batch.next_offset
            replayed += 1
        await wal.start()
        if replayed:
            log.info("replayed %d WAL records from %s; uploading them", replayed, self.settings.wal_dir)
            block = self.log_cache.current
            block.uploaded = asyncio.get_running_loop().create_future()
            if not self.local_wal:
                self._pending_upload_bytes += block.nbytes
            self._seal()
            await asyncio.shield(block.uploaded)
        await wal.release(wal._index)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._started:
            try:
                await asyncio.wait_for(self._drain(), timeout=self.settings.append_timeout_ms / 1000)
            except (TimeoutError, StreamError) as exc:
                log.warning("could not upload everything before closing (the WAL keeps it): %s", exc)
        await self.reader.close()
        for task in [*self._tasks, *self.upload_tasks]:
            task.cancel()
        for upload in list(self.upload_tasks):
            try:
                await upload
            except (asyncio.CancelledError, StreamError):
                pass
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("s3stream background task failed")
        self._tasks.clear()
        if self._wal is not None:
            await self._wal.close()
        for state in self._streams.values():
            for _, waiter in state.waiters:
                if not waiter.done():
                    waiter.cancel()
        self.objects.close()
        self._db_executor.shutdown(wait=True)

    async def _drain(self) -> None:
        if self.log_cache.current.nbytes:
            self._seal()
        await self._wait_uploaded(list(self.log_cache.blocks))

    # Streams ---------------------------------------------------------------------------------

    async def create_stream(self) -> int:
        stream_id = await self._db(self.meta.create_stream)
        self._streams[stream_id] = StreamState(0, 0)
        return stream_id

    async def delete_stream(self, stream_id: int) -> None:
        self._stream(stream_id)
        await self._db(self.meta.delete_stream, stream_id)
        state = self._streams.pop(stream_id, None)
        self.log_cache.forget_stream(stream_id)
        if state is not None:
            for _, waiter in state.waiters:
                if not waiter.done():
                    waiter.set_exception(StreamNotFound(f"stream {stream_id} was deleted"))
                    waiter.exception()

    def stream_info(self, stream_id: int) -> StreamInfo:
        state = self._stream(stream_id)
        return StreamInfo(stream_id, state.start, state.confirmed_end)

    def stream_ids(self) -> list[int]:
        return list(self._streams)

    async def trim(self, stream_id: int, new_start_offset: int) -> None:
        state = self._stream(stream_id)
        new_start = min(new_start_offset, state.confirmed_end)
        if new_start <= state.start:
            return
        await self._db(self.meta.trim_stream, stream_id, new_start)
        state.start = max(state.start, new_start)

    def wait_for_data(self, stream_id: int, offset: int) -> asyncio.Future[None]:
        state = self._stream(stream_id)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if state.confirmed_end > offset:
            future.set_result(None)
        else:
            state.waiters = [(o, w) for o, w in state.waiters if not w.done()]
            state.waiters.append((offset, future))
        return future

    def _confirm(self, stream_id: int, end: int) -> None:
        state = self._streams.get(stream_id)
        if state is None or end <= state.confirmed_end:
            return
        state.confirmed_end = end
        if state.waiters:
            keep = []
            for offset, waiter in state.waiters:
                if waiter.done():
                    continue
                if end > offset:
                    waiter.set_result(None)
                else:
                    keep.append((offset, waiter))
            state.waiters = keep

    # Append ----------------------------------------------------------------------------------

    async def append(self, stream_id: int, payload: bytes | memoryview, record_count: int) -> int:
        payload = self._check_append(stream_id, payload, record_count)
        if self._backlog_bytes() > self.settings.wal_capacity_bytes:
            await self._wait_for_space()
        base, durable = self._append_nowait(stream_id, payload, record_count)
        # A SharedFuture: a cancelled caller cannot cancel the acknowledgement of the others.
        await durable
        return base

    async def append_many(self, items: Sequence[tuple[int, bytes | memoryview, int]]) -> list[int]:
        """Append several ``(stream_id, payload, record_count)`` batches (e.g. the partitions of one
        produce request) with one wait: they share a WAL group or batch object. Validation happens
        for all items before any is appended; returns the base offsets in item order."""
        checked = [(sid, self._check_append(sid, payload, count), count) for sid, payload, count in items]
        if self._backlog_bytes() > self.settings.wal_capacity_bytes:
            await self._wait_for_space()
        for sid, _, _ in checked:
            self._stream(sid)
        bases: list[int] = []
        waits: dict[int, asyncio.Future[None]] = {}
        for sid, payload, count in checked:
            base, durable = self._append_nowait(sid, payload, count)
            bases.append(base)
            waits[id(durable)] = durable
        for durable in waits.values():
            await durable
        return bases

    def _check_append(self, stream_id: int, payload: bytes | memoryview, record_count: int) -> bytes:
        if type(payload) is not bytes:
            if not isinstance(payload, bytes | bytearray | memoryview):
                raise TypeError(f"payload must be bytes-like, not {type(payload).__name__}")
            payload = bytes(payload)  # the caller may reuse its buffer; we keep the batch
        if not isinstance(record_count, int) or record_count <= 0:
            raise ValueError(f"record_count must be a positive integer, not {record_count!r}")
        if not self._started or self._closed:
            raise StorageUnavailable("the store is not open")
        self._stream(stream_id)
        return payload

    def _append_nowait(
        self, stream_id: int, payload: bytes, record_count: int
    ) -> tuple[int, asyncio.Future[None]]:
        """Assign offsets and queue the batch; returns its base and the future of its durability."""
        state = self._stream(stream_id)
        base = state.next_end
        state.next_end = base + record_count
        block = self.log_cache.add(stream_id, StoredBatch(base, record_count, payload))
        if block.uploaded is None:
            self._open_block(block)
        block.appends += 1
        wal = self._wal
        if wal is not None:
            group = wal.append(stream_id, base, record_count, payload)
            group.ends[stream_id] = state.next_end
            if block.nbytes >= self.settings.upload_bytes:
                self._seal()
            return base, group.future
        uploaded = block.uploaded
        assert uploaded is not None
        self._pending_upload_bytes += len(payload)
        if block.nbytes >= self.settings.object_batch_bytes:
            self._seal()
        return base, uploaded

    def _open_block(self, block: Block) -> None:
        loop = asyncio.get_running_loop()
        block.uploaded = SharedFuture(loop=loop)
        block.generation = self._generation
        delay = (self.settings.upload_interval_ms if self.local_wal else self.settings.object_batch_ms) / 1000
        loop.call_later(delay, self._seal_if_current, block)

    def _seal_if_current(self, block: Block) -> None:
        if block is self.log_cache.current and block.nbytes and not self._closed:
            self._seal()

    def _seal(self) -> Block:
        block = self.log_cache.seal()
        if self._wal is not None and self._wal.failure is None:
            block.wal_marker = self._wal.roll()
        if block.uploaded is None:
            block.uploaded = asyncio.get_running_loop().create_future()
        self._upload_queue.put_nowait(block)
        return block

    def _backlog_bytes(self) -> int:
        """Bytes waiting to be made durable in object storage: the WAL's size (local mode) or the
        batch objects not yet committed (object mode)."""
        if self._wal is not None:
            return self._wal.bytes_used
        return self._pending_upload_bytes

    async def _wait_for_space(self) -> None:
        """Backpressure: wait (bounded) until uploads bring the backlog under the WAL capacity."""
        if self.log_cache.current.nbytes:
            self._seal()
        capacity = self.settings.wal_capacity_bytes
        deadline = time.monotonic() + self.settings.append_timeout_ms / 1000
        while self._backlog_bytes() > capacity:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StorageUnavailable(
                    f"the WAL is full ({self._backlog_bytes()} of {capacity} bytes) and "
                    f"uploads to {self.objects.description} are not keeping up"
                )
            self._space_freed.clear()
            try:
                await asyncio.wait_for(self._space_freed.wait(), remaining)
            except TimeoutError:
                pass

    def _on_wal_commit(self, group: Group) -> None:
        self.metrics.appends.inc(group.appends)
        self.metrics.append_bytes.inc(group.payload_bytes)
        for stream_id, end in group.ends.items():
            self._confirm(stream_id, end)

    async def _wait_uploaded(self, blocks: list[Block]) -> None:
        pending = [b.uploaded for b in blocks if b.uploaded is not None and not b.committed]
        for future in pending:
            await asyncio.shield(future)

    async def flush(self, stream_ids: Iterable[int] | None = None) -> None:
        wanted = None if stream_ids is None else set(stream_ids)
        current = self.log_cache.current
        if current.nbytes and (wanted is None or wanted & current.runs.keys()):
            self._seal()
        blocks = [
            b
            for b in self.log_cache.blocks
            if b.sealed and not b.committed and (wanted is None or wanted & b.runs.keys())
        ]
        await self._wait_uploaded(blocks)

    # Read ------------------------------------------------------------------------------------

    async def fetch(
        self, stream_id: int, start_offset: int, max_bytes: int, end_offset: int | None = None
    ) -> list[StoredBatch]:
        state = self._stream(stream_id)
        if start_offset < state.start or start_offset > state.confirmed_end:
            raise OffsetOutOfRange(stream_id, start_offset, state.start, state.confirmed_end)
        limit = state.confirmed_end if end_offset is None else min(end_offset, state.confirmed_end)
        result: list[StoredBatch] = []
        size = 0
        offset = start_offset
        while offset < limit:
            run = self.log_cache.lookup(stream_id, offset)
            if run is not None:
                self.metrics.cache_read("log", True)
                candidates, first = run.batches, run.index_of(offset)
            else:
                try:
                    candidates = await self.reader.read(
                        stream_id, state.ranges, state.range_starts, offset, max_bytes - size
                    )
                except ObjectNotFound:
                    # The object was swapped out by compaction (here or by another node sharing
                    # the metadata DB): refresh this stream's ranges from the DB and retry once.
                    await self._reload_ranges(stream_id, state)
                    candidates = await self.reader.read(
                        stream_id, state.ranges, state.range_starts, offset, max_bytes - size
                    )
                first = 0
            progressed = False
            # Hot loop for small batches: index walk, no slicing, no property calls.
            for position in range(first, len(candidates)):
                batch = candidates[position]
                base = batch.base_offset
                following = base + batch.record_count
                if following <= offset:
                    continue
                length = len(batch.payload)
                if base >= limit or (result and size + length > max_bytes):
                    return result
                result.append(batch)
                size += length
                offset = following
                progressed = True
            if not progressed:
                break
        return result

    async def _reload_ranges(self, stream_id: int, state: StreamState) -> None:
        async with self.commit_lock:
            state.set_ranges(await self._db(self.meta.load_ranges, [stream_id]))

    async def locate(self, stream_id: int, start_offset: int, end_offset: int) -> list[ObjectSlice]:
        state = self._stream(stream_id)
        if start_offset < state.start or end_offset > state.committed_end or start_offset > end_offset:
            raise OffsetOutOfRange(
                stream_id,
                start_offset if start_offset < state.start else end_offset,
                state.start,
                state.committed_end,
            )
        slices = []
        index = max(bisect.bisect_right(state.range_starts, start_offset) - 1, 0)
        for rng in state.ranges[index:]:
            if rng.start_offset >= end_offset:
                break
            if rng.end_offset <= start_offset:
                continue
            blocks = [
                b
                for b in await self.reader.blocks_of(rng)
                if b.end_offset > start_offset and b.start_offset < end_offset
            ]
            position = blocks[0].position if blocks else rng.position
            size = (blocks[-1].position + blocks[-1].size - position) if blocks else rng.size
            slices.append(
                ObjectSlice(
                    rng.object_key,
                    position,
                    size,
                    stream_id,
                    max(start_offset, rng.start_offset),
                    min(end_offset, rng.end_offset),
                )
            )
        return slices

    # Used by compaction ------------------------------------------------------------------------

    def replace_ranges(self, replaced: set[int], new_ranges: list[RangeRow]) -> None:
        """Swap the in-memory view after a compaction commit (same transaction boundary as the DB)."""
        touched: dict[int, list[RangeRow]] = {}
        for row in new_ranges:
            touched.setdefault(row.stream_id, []).append(row)
        for sid, state in self._streams.items():
            if sid in touched or any(r.object_id in replaced for r in state.ranges):
                state.set_ranges(
                    [r for r in state.ranges if r.object_id not in replaced] + touched.get(sid, [])
                )

    def forget_object(self, key: str) -> None:
        self.reader.forget_object(key)
