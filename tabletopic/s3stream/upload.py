"""Uploads: sealed LogCache blocks become stream-set and stream objects, registered together with
the streams' new end offsets in one metadata transaction.

Local WAL: an upload is retried until it succeeds (the data is safe on disk), then the WAL segments
it covered are deleted. Object WAL: the upload *is* the acknowledgement; a failure fails every
append not yet acknowledged and rewinds the streams so no offset is left as a gap.

Written as a mixin of :class:`~tabletopic.s3stream.store.S3StreamStore` (it shares the store's
state); the annotations below list what it uses.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from tabletopic import crashpoints
from tabletopic.s3stream.cache import Block, LogCache
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.db import STREAM_OBJECT, STREAM_SET, NewObject, RangeRow, StreamMetadata
from tabletopic.s3stream.metrics import StoreMetrics
from tabletopic.s3stream.objects import BuiltObject, build_object
from tabletopic.s3stream.objectstore import AsyncObjectStore
from tabletopic.s3stream.streams import StorageUnavailable, StoredBatch
from tabletopic.s3stream.wal import LocalWal, RollMarker

if TYPE_CHECKING:
    from tabletopic.s3stream.store import StreamState

log = logging.getLogger(__name__)

T = TypeVar("T")


class StaleUpload(StorageUnavailable):
    """An earlier batch object failed, so this one (whose offsets follow it) must not commit."""


MAX_UPLOADS_IN_FLIGHT = 4


class UploadMixin:
    settings: StoreSettings
    meta: StreamMetadata
    objects: AsyncObjectStore
    metrics: StoreMetrics
    log_cache: LogCache
    commit_lock: asyncio.Lock
    inflight_objects: set[int]
    _streams: dict[int, StreamState]
    _upload_queue: asyncio.Queue[Block]
    _wal: LocalWal | None
    _space_freed: asyncio.Event
    _generation: int
    _pending_upload_bytes: int
    _db: Callable[..., Awaitable[Any]]
    upload_tasks: set[asyncio.Future[None]]

    @property
    def local_wal(self) -> bool:
        return self.settings.wal_mode == "local"

    def _confirm(self, stream_id: int, end: int) -> None:
        raise NotImplementedError

    async def _upload_loop(self) -> None:
        loop = asyncio.get_running_loop()
        slots = asyncio.Semaphore(MAX_UPLOADS_IN_FLIGHT)
        previous: asyncio.Future[None] = loop.create_future()
        previous.set_result(None)
        while True:
            blocks = [await self._upload_queue.get()]
            while not self._upload_queue.empty():  # uploads lagging: merge what waits into one upload
                blocks.append(self._upload_queue.get_nowait())
            if self.local_wal:
                await self._upload_until_done(blocks)
                continue
            # Object WAL: up to MAX_UPLOADS_IN_FLIGHT uploads PUT at once; commits stay in order.
            await slots.acquire()
            settled: asyncio.Future[None] = loop.create_future()
            task = asyncio.ensure_future(self._upload_or_fail(blocks, self._turn_after(previous, blocks)))
            self.upload_tasks.add(task)
            task.add_done_callback(lambda t, s=settled: self._upload_settled(t, s, slots))  # type: ignore[misc]
            previous = settled

    def _turn_after(
        self, previous: asyncio.Future[None], blocks: list[Block]
    ) -> Callable[[], Awaitable[None]]:
        async def turn() -> None:
            await asyncio.shield(previous)
            if any(b.generation != self._generation for b in blocks):
                raise StaleUpload("an earlier batch object failed")

        return turn

    def _upload_settled(
        self, task: asyncio.Future[None], settled: asyncio.Future[None], slots: asyncio.Semaphore
    ) -> None:
        self.upload_tasks.discard(task)
        slots.release()
        if not settled.done():
            settled.set_result(None)
        if not task.cancelled() and task.exception() is not None:
            log.error("batch object upload task failed: %s", task.exception())

    async def _upload_until_done(self, blocks: list[Block]) -> None:
        """Local WAL: the data is safe on disk, so retry (with backoff) until the upload succeeds."""
        delay = 0.1
        while True:
            try:
                await self._upload(blocks)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("upload to %s failed, retrying in %.1fs: %s", self.objects.description, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        released = 0
        for block in blocks:
            if isinstance(block.wal_marker, RollMarker):
                released = max(released, await asyncio.shield(block.wal_marker.done))
        if released and self._wal is not None:
            await self._wal.release(released)
            self._space_freed.set()

    async def _upload_or_fail(
        self, blocks: list[Block], turn: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Object WAL: the upload is the acknowledgement; on failure fail every append not yet
        acknowledged (their offsets would otherwise leave a gap) and rewind the streams."""
        live = [b for b in blocks if b.generation == self._generation]
        for block in blocks:
            if block not in live:
                self._fail_block(block, StorageUnavailable("an earlier batch object failed"))
        if not live:
            if turn is not None:
                await _settle(turn)  # keep the commit order for the uploads after this one
            return
        try:
            await self._upload(live, turn)
        except asyncio.CancelledError:
            raise
        except StaleUpload as exc:
            for block in live:
                self._fail_block(block, exc)
        except Exception as exc:
            log.error("batch object upload to %s failed: %s", self.objects.description, exc)
            error = exc if isinstance(exc, StorageUnavailable) else StorageUnavailable(str(exc))
            self._generation += 1
            failed = [*live, *[b for b in self.log_cache.blocks if not b.committed and b not in live]]
            for block in failed:
                self._fail_block(block, error)
            for state in self._streams.values():
                state.next_end = state.confirmed_end

    def _fail_block(self, block: Block, error: Exception) -> None:
        self.log_cache.discard(block)
        self._release_pending(block)
        if block.uploaded is not None and not block.uploaded.done():
            block.uploaded.set_exception(error)
            block.uploaded.exception()

    async def _upload(self, blocks: list[Block], turn: Callable[[], Awaitable[None]] | None = None) -> None:
        """Write ``blocks`` as objects and commit them. With ``turn`` (object WAL, several uploads
        in flight) the PUTs overlap with earlier uploads, but the commit, and the handling of a
        failure, wait until ``turn()`` says every earlier upload has committed or failed."""
        started = time.perf_counter()
        runs: dict[int, list[StoredBatch]] = {}
        sizes: dict[int, int] = {}
        for block in blocks:
            for stream_id, run in block.runs.items():
                if stream_id in self._streams:
                    runs.setdefault(stream_id, []).extend(run.batches)
                    sizes[stream_id] = sizes.get(stream_id, 0) + run.nbytes
        big = [(sid, b) for sid, b in runs.items() if sizes[sid] >= self.settings.split_bytes]
        big_ids = {sid for sid, _ in big}
        small = [(sid, b) for sid, b in runs.items() if sid not in big_ids]
        layouts = ([(STREAM_SET, small)] if small else []) + [(STREAM_OBJECT, [item]) for item in big]
        reserved: list[tuple[int, str]] = []
        try:
            built = []
            try:
                if layouts:
                    reserved = await self._db(self.meta.prepare_objects, [kind for kind, _ in layouts])
                    self.inflight_objects.update(oid for oid, _ in reserved)
                    built = await self._store(layouts, reserved)
                if turn is not None:
                    await turn()
            except asyncio.CancelledError:
                raise  # closing: reserved objects stay `prepared` and garbage collection takes them
            except StaleUpload:
                await self._db(self.meta.abandon_prepared, [oid for oid, _ in reserved])
                raise
            except Exception:
                if reserved:
                    await self._db(self.meta.abandon_prepared, [oid for oid, _ in reserved])
                if turn is not None:
                    # Report the failure in commit order: an earlier upload may still commit, and the
                    # rewind must not go below what it acknowledges (raises StaleUpload if it failed).
                    await turn()
                raise
            if layouts:
                await self._commit(reserved, built, runs)
        finally:
            self.inflight_objects.difference_update(oid for oid, _ in reserved)
        for block in blocks:
            block.committed = True
            self._release_pending(block)
            if not self.local_wal:
                self.metrics.appends.inc(block.appends)
                self.metrics.append_bytes.inc(block.nbytes)
                for sid, run in block.runs.items():
                    self._confirm(sid, run.end)
            if block.uploaded is not None and not block.uploaded.done():
                block.uploaded.set_result(None)
        self.log_cache.evict()
        self.metrics.upload_seconds.observe(time.perf_counter() - started)

    async def _store(
        self, layouts: list[tuple[str, list[tuple[int, list[StoredBatch]]]]], reserved: list[tuple[int, str]]
    ) -> list[BuiltObject]:
        """Build and PUT the reserved objects (concurrently)."""
        built = await asyncio.to_thread(
            lambda: [build_object(group, self.settings.block_bytes) for _, group in layouts]
        )
        crashpoints.crash_point("upload.before_put")
        await asyncio.gather(
            *(self.objects.put(key, obj.parts) for (_, key), obj in zip(reserved, built, strict=True))
        )
        crashpoints.crash_point("upload.after_put")
        return built

    async def _commit(
        self, reserved: list[tuple[int, str]], built: list[BuiltObject], runs: dict[int, list[StoredBatch]]
    ) -> None:
        """One transaction: the objects become committed and the streams' ends advance."""
        new_objects = [
            NewObject(oid, obj.size, obj.ranges) for (oid, _), obj in zip(reserved, built, strict=True)
        ]
        ends = {sid: batches[-1].next_offset for sid, batches in runs.items()}
        async with self.commit_lock:
            await self._db(self.meta.commit_upload, new_objects, ends)
            crashpoints.crash_point("upload.after_commit")
            for (oid, key), obj in zip(reserved, built, strict=True):
                self._add_ranges(oid, key, obj.size, obj.ranges)
                self.metrics.upload_bytes.inc(obj.size)
        for sid, end in ends.items():
            state = self._streams.get(sid)
            if state is not None:
                state.committed_end = max(state.committed_end, end)

    def _release_pending(self, block: Block) -> None:
        if not self.local_wal and not block.released:
            block.released = True
            self._pending_upload_bytes -= block.nbytes
            self._space_freed.set()

    def _add_ranges(self, object_id: int, key: str, size: int, ranges: Iterable[Any]) -> None:
        for rng in ranges:
            state = self._streams.get(rng.stream_id)
            if state is not None:
                state.add_range(
                    RangeRow(
                        rng.stream_id,
                        rng.start_offset,
                        rng.end_offset,
                        object_id,
                        key,
                        size,
                        rng.position,
                        rng.size,
                    )
                )


async def _settle(turn: Callable[[], Awaitable[None]]) -> None:
    """Wait for an upload's turn, ignoring whether earlier uploads failed."""
    try:
        await turn()
    except StaleUpload:
        pass
