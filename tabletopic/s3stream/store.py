"""The S3Stream engine: :class:`S3StreamStore` implements :class:`~tabletopic.s3stream.streams.StreamStore`.

Write path. ``append`` assigns the offsets synchronously (so they follow call order per stream),
puts the batch in the LogCache's current block and then waits for durability, which is shared by
every append of the same moment:

- ``local`` WAL mode: the batch joins the WAL's current group; one fsync acknowledges the group.
  The block is uploaded later (size or time threshold) and the WAL segments it covers are deleted.
- ``object`` WAL mode: the block is the next batch object; it is sealed and uploaded as soon as an
  upload slot is free (group commit over PUTs, paced by ``s3stream.wal.object.batch.ms``; see
  batching.py) or at ``s3stream.wal.object.batch.bytes``, and its commit acknowledges every append
  in it.

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
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.s3stream.cache import Block, BlockCache, LogCache
from tabletopic.s3stream.compaction import Compactor
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.db import RangeRow, StreamMetadata
from tabletopic.s3stream.epochs import EpochHistory
from tabletopic.s3stream.metrics import StoreMetrics
from tabletopic.s3stream.objectstore import AsyncObjectStore, ObjectNotFound, ObjectStore
from tabletopic.s3stream.reader import ObjectReader
from tabletopic.s3stream.semantics import DataWaiters, take_batches, watch_streams
from tabletopic.s3stream.settings import APPEND_TIMEOUT_MS, WalMode
from tabletopic.s3stream.shared_wal import open_shared_wal
from tabletopic.s3stream.state import StoreState, StreamState
from tabletopic.s3stream.streams import (
    BatchTransform,
    DataWatch,
    ObjectSlice,
    OffsetOutOfRange,
    PendingAppend,
    StorageUnavailable,
    StoredBatch,
    StreamError,
    StreamFenced,
    StreamInfo,
    StreamNotFound,
    kept_payload,
)
from tabletopic.s3stream.upload import Uploader
from tabletopic.s3stream.wal import Group, LocalWal, SharedFuture, WalCorruption
from tabletopic.tasks import set_or_timeout

log = logging.getLogger(__name__)

RELOAD_CHUNK = 1000  # streams whose ranges one query reloads


class S3StreamStore:
    """A node's streams on object storage; see the module docstring for the design.

    The store creates the :class:`~tabletopic.s3stream.state.StoreState` and composes the
    :class:`~tabletopic.s3stream.upload.Uploader` and the
    :class:`~tabletopic.s3stream.compaction.Compactor` over it; it runs their loops as tasks.
    """

    def __init__(
        self,
        settings: StoreSettings,
        engine: Engine,
        object_store: ObjectStore,
        registry: CollectorRegistry | None = None,
        owned_only: bool = False,
    ) -> None:
        # Cluster mode: the store holds only the streams this node opened with an epoch
        # (open_stream); nothing is loaded at start, and created streams wait to be opened.
        self.owned_only = owned_only
        # Read-only views of streams other brokers hold, with when they were loaded (read_snapshot).
        self._views: dict[int, tuple[StreamState, float]] = {}
        objects = AsyncObjectStore(object_store, settings.object_threads)
        metrics = StoreMetrics(registry)
        block_cache = BlockCache(settings.block_cache_bytes)
        self.state = state = StoreState(
            settings=settings,
            meta=StreamMetadata(engine),
            objects=objects,
            metrics=metrics,
            log_cache=LogCache(settings.log_cache_bytes),
            block_cache=block_cache,
            reader=ObjectReader(objects, block_cache, metrics, settings.readahead_bytes),
        )
        self.uploader = Uploader(state)
        # Object WAL: the pending start of the current batch object, and its trigger when an
        # upload ends (group commit over PUTs, see batching.py).
        self._batch_start: asyncio.TimerHandle | None = None
        self.uploader.on_slot_free = self._schedule_batch_start
        self.compactor = Compactor(state)
        self.compactor.copy_unheld = owned_only
        if owned_only:  # until the cluster says this node runs compaction (its controller)
            self.compactor.active = lambda: False
        self._tasks: list[asyncio.Task[None]] = []
        # Read-only views of streams other nodes hold (cluster mode), refreshed by refresh().
        self._followed: dict[int, StreamState] = {}
        self._closed = False
        self._started = False
        # Shared WAL (cluster mode): this start's WAL directory (its name, and the whole path the
        # cluster records), and the paths of earlier ones taken back at start.
        self.wal_incarnation: str | None = None
        self.wal_directory: str | None = None
        self.recovered_wals: list[str] = []
        metrics.wal_bytes.set_function(lambda: float(state.wal.bytes_used if state.wal else 0))

    # Life cycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        state = self.state
        await state.db(state.meta.migrate)
        await state.objects.check()
        if not self.owned_only:
            streams = await state.db(state.meta.load_streams)
            state.streams = {sid: StreamState(start, end) for sid, (start, end) in streams.items()}
            by_stream: dict[int, list[RangeRow]] = {}
            for row in await state.db(state.meta.load_ranges, None):
                by_stream.setdefault(row.stream_id, []).append(row)
            for sid, rows in by_stream.items():
                if sid in state.streams:
                    state.streams[sid].set_ranges(rows)
        self._tasks.append(asyncio.create_task(self.uploader.run(), name="s3stream-uploader"))
        if state.local_wal and self.owned_only and state.settings.wal_mode is WalMode.SHARED:
            await self._open_shared_wal()
        elif state.local_wal:
            await self._recover_wal()
        elif LocalWal.holds_data(state.settings.wal_dir):
            # Switched from local to object mode: acknowledged appends may still be in the old WAL.
            log.warning(
                "s3stream.wal.mode=object, but %s holds a local WAL: uploading it before starting",
                state.settings.wal_dir,
            )
            wal = await self._recover_wal()
            await wal.close()
            wal.remove_segments()
            state.wal = None
        # A cluster node compacts only while ``compactor.active`` says so (see compaction.py).
        if state.settings.compaction_interval_ms > 0:
            self._tasks.append(asyncio.create_task(self.compactor.run_forever(), name="s3stream-compactor"))
        self._started = True
        log.info(
            "s3stream started: %d streams, WAL mode %s, objects in %s",
            len(state.streams),
            state.settings.wal_mode,
            state.objects.description,
        )

    async def _recover_wal(self) -> LocalWal:
        """Open the local WAL, replay what the metadata DB lacks into the LogCache and upload it."""
        state = self.state
        settings = state.settings
        wal = state.wal = LocalWal(
            settings.wal_dir,
            settings.wal_segment_bytes,
            self._on_wal_commit,
            state.metrics.wal_fsync_seconds.observe,
        )
        records = await state.db(lambda: list(wal.replay()))
        replayed = 0
        for record in records:
            stream = state.streams.get(record.stream_id)
            if stream is None:  # deleted since
                continue
            if record.base_offset + record.record_count <= stream.committed_end:
                continue  # uploaded before the crash
            if record.base_offset != stream.next_end:
                raise WalCorruption(
                    f"WAL record of stream {record.stream_id} starts at offset {record.base_offset} but the "
                    f"stream ends at {stream.next_end}: the WAL in {settings.wal_dir} does not match the "
                    f"metadata database"
                )
            batch = StoredBatch(record.base_offset, record.record_count, record.payload)
            state.log_cache.add(record.stream_id, batch)
            stream.next_end = stream.confirmed_end = batch.next_offset
            replayed += 1
        await wal.start()
        if replayed:
            log.info("replayed %d WAL records from %s; uploading them", replayed, settings.wal_dir)
            block = state.log_cache.current
            block.uploaded = asyncio.get_running_loop().create_future()
            if not state.local_wal:
                state.pending_upload_bytes += block.nbytes
            self._seal()
            await asyncio.shield(block.uploaded)
        await wal.release(wal.current_segment)
        return wal

    async def _open_shared_wal(self) -> None:
        """Cluster mode, shared WAL: see :func:`~tabletopic.s3stream.shared_wal.open_shared_wal`."""
        opened = await open_shared_wal(self.state, self._on_wal_commit)
        self.wal_incarnation, self.wal_directory = opened.incarnation, opened.directory
        self.recovered_wals = opened.recovered

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        state = self.state
        taken_over = state.wal is not None and state.wal.taken_over is not None
        if taken_over:  # what the WAL holds is its recoverer's now: nothing here may be uploaded
            log.info("not uploading before closing: this broker's shared WAL was taken over")
        elif self._started:
            try:
                await asyncio.wait_for(self._drain(), timeout=state.settings.append_timeout_ms / 1000)
            except TimeoutError:  # its message is empty: say what ran out
                log.warning(
                    "could not upload everything within %s (%d ms) before closing: the WAL keeps it, "
                    "and the next start uploads it", APPEND_TIMEOUT_MS.name, state.settings.append_timeout_ms,
                )  # fmt: skip
            except StreamError as exc:
                log.warning("could not upload everything before closing (the WAL keeps it): %s", exc)
        await state.reader.close()
        if self._batch_start is not None:
            self._batch_start.cancel()
        uploads = self.uploader.in_flight
        for task in [*self._tasks, *uploads]:
            task.cancel()
        for upload in list(uploads):
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
        if state.wal is not None:
            await state.wal.close()
        for stream in state.streams.values():
            stream.waiters.wake_all()
        state.objects.close()
        state.db_executor.shutdown(wait=True)

    async def _drain(self) -> None:
        log_cache = self.state.log_cache
        if log_cache.current.nbytes:
            self._seal()
        await self._wait_uploaded(list(log_cache.blocks))

    # Streams ---------------------------------------------------------------------------------

    async def create_stream(self) -> int:
        state = self.state
        stream_id = await state.db(state.meta.create_stream)
        if not self.owned_only:
            state.streams[stream_id] = StreamState(0, 0)
        return stream_id

    async def create_streams(self, count: int) -> list[int]:
        state = self.state
        stream_ids = await state.db(state.meta.create_streams, count)
        if not self.owned_only:
            for stream_id in stream_ids:
                state.streams[stream_id] = StreamState(0, 0)
        return stream_ids

    async def open_stream(self, stream_id: int, epoch: int, owner: int) -> StreamInfo:
        """Take ownership of a stream with ``epoch`` (cluster mode) and load it from the metadata
        database; a previous owner is fenced from then on. Opening again with the fence already
        held is a no-op.

        Raises:
            StreamNotFound: no such stream.
            StreamFenced: someone holds it with a higher epoch.
        """
        result = (await self.open_streams([(stream_id, epoch, owner)]))[stream_id]
        if isinstance(result, StreamError):
            raise result
        return result

    async def open_streams(
        self, requests: Sequence[tuple[int, int, int]]
    ) -> dict[int, StreamInfo | StreamError]:
        """:meth:`open_stream` for many ``(stream_id, epoch, owner)``: one metadata transaction and
        one ranges query for all of them, so taking over thousands of partitions costs a few round
        trips, not thousands. Each stream opens or fails on its own (the error it would raise)."""
        state = self.state
        results: dict[int, StreamInfo | StreamError] = {}
        wanted = []
        for stream_id, epoch, owner in requests:
            current = state.streams.get(stream_id)
            if current is not None and current.fence == (epoch, owner):
                results[stream_id] = StreamInfo(stream_id, current.start, current.confirmed_end)
            else:
                wanted.append((stream_id, epoch, owner))
        if not wanted:
            return results
        if state.wal is not None:
            try:
                await state.wal.check_held()
            except StreamError as exc:  # deposed: the streams are another broker's to open
                return {**results, **{sid: exc for sid, _, _ in wanted}}
        async with state.commit_lock:
            opened = await state.db(state.meta.open_streams, wanted)
            ok = [sid for sid, found in opened.items() if not isinstance(found, StreamError)]
            ranges = await state.db(state.meta.load_ranges, ok) if ok else []
        by_stream: dict[int, list[RangeRow]] = {}
        for row in ranges:
            by_stream.setdefault(row.stream_id, []).append(row)
        for stream_id, epoch, owner in wanted:
            found = opened[stream_id]
            if isinstance(found, StreamError):
                results[stream_id] = found
                continue
            current = state.streams.get(stream_id)
            if current is not None:  # an older ownership of ours: whatever it had pending is not ours
                current.waiters.wake_all()
                state.log_cache.forget_stream(stream_id)
            stream = StreamState(found.start_offset, found.end_offset, (epoch, owner), found.epochs)
            stream.set_ranges(by_stream.get(stream_id, []))
            state.streams[stream_id] = stream
            results[stream_id] = StreamInfo(stream_id, found.start_offset, found.end_offset)
        return results

    def epochs(self, stream_id: int) -> EpochHistory:
        """The stream's epoch history, as loaded when it was opened here, or with the view
        :meth:`read_snapshot` last read of a stream another broker holds."""
        view = self._views.get(stream_id)
        if stream_id not in self.state.streams and view is not None:
            return view[0].epochs
        return self._readable(stream_id).epochs

    async def close_stream(self, stream_id: int) -> None:
        """Give up a stream opened with :meth:`open_stream`: upload what it has pending, check the
        fence once more and forget it. Raises StreamFenced if it was taken meanwhile."""
        failed = await self.close_streams([stream_id])
        if stream_id in failed:
            raise failed[stream_id]

    async def close_streams(self, stream_ids: Sequence[int]) -> dict[int, StreamError]:
        """:meth:`close_stream` for many streams: one upload of what they have pending and one
        fence check for all (a broker handing thousands of partitions over at shutdown must not
        pay a transaction each). Every stream is forgotten here either way; returns the errors of
        those that failed (StreamFenced: taken meanwhile, so what was appended since is not this
        store's to acknowledge)."""
        state = self.state
        held = {sid: stream for sid in stream_ids if (stream := state.streams.get(sid)) is not None}
        failed: dict[int, StreamError] = {}
        if state.local_wal:  # an fsync acknowledges: from now on nothing is, so the upload has it all
            for stream in held.values():
                stream.closing = True
        cancelled = False
        try:
            try:
                await self.flush(list(held))
            except StreamError as exc:
                failed.update(dict.fromkeys(held, exc))
                return failed
            fences = {
                sid: stream.fence
                for sid, stream in held.items()
                if stream.fence is not None and state.streams.get(sid) is stream
            }
            if fences:
                try:
                    await state.db(state.meta.close_streams, fences)
                except StreamFenced as exc:
                    failed.update(
                        {sid: exc for sid in exc.stream_ids if sid in fences} or dict.fromkeys(fences, exc)
                    )
        except asyncio.CancelledError:
            # The broker is stopping. The streams stay held, still owned here in the database, so
            # that closing the store uploads what they acknowledged: an upload leaves out streams
            # no longer held, and the WAL is then trimmed past their appends.
            cancelled = True
            raise
        finally:
            if not cancelled:
                self._forget(held)
        return failed

    def _forget(self, streams: dict[int, StreamState]) -> None:
        state = self.state
        for sid, stream in streams.items():
            if state.streams.get(sid) is stream:
                del state.streams[sid]
                state.log_cache.forget_stream(sid)
                stream.waiters.wake_all()

    def is_open(self, stream_id: int) -> bool:
        return stream_id in self.state.streams

    @property
    def write_failure(self) -> str | None:
        """Why this store refuses every append until the node restarts (its WAL failed a write: a
        full disk, an I/O error, a shared WAL taken over), else None; for ``/health``, so that a
        supervisor's liveness probe restarts the node as Kafka's broker halts when its log
        directories fail."""
        wal = self.state.wal
        if wal is None or wal.failure is None:
            return None
        return f"the WAL in {wal.directory} failed: {wal.failure}"

    async def delete_stream(self, stream_id: int) -> None:
        state = self.state
        if not self.owned_only:  # a cluster node deletes streams it does not hold too
            state.stream(stream_id)
        await state.db(state.meta.delete_stream, stream_id)
        stream = state.streams.pop(stream_id, None)
        state.log_cache.forget_stream(stream_id)
        if stream is not None:
            stream.waiters.wake_all()

    def stream_info(self, stream_id: int) -> StreamInfo:
        stream = self._readable(stream_id)
        return StreamInfo(stream_id, stream.start, stream.confirmed_end)

    def _readable(self, stream_id: int) -> StreamState:
        """A stream held here, else one followed (read from the metadata DB by refresh)."""
        held = self.state.streams.get(stream_id)
        if held is not None:
            return held
        followed = self._followed.get(stream_id)
        if followed is not None:
            return followed
        return self.state.stream(stream_id)  # raises StreamNotFound

    async def refresh(self, stream_ids: Iterable[int]) -> None:
        if not self.owned_only:
            return
        state = self.state
        for sid in stream_ids:
            if sid in state.streams:
                self._followed.pop(sid, None)
                continue
            try:
                start, end = await state.db(state.meta.load_stream, sid)
            except StreamNotFound:
                self._followed.pop(sid, None)
                continue
            followed = self._followed.get(sid)
            if followed is None or followed.committed_end != end or followed.start != start:
                followed = StreamState(start, end)
                followed.set_ranges(await state.db(state.meta.load_ranges, [sid]))
                self._followed[sid] = followed

    def known_streams(self) -> set[int]:
        """Streams held here and streams followed (read-only views of other nodes' streams)."""
        return set(self.state.streams) | set(self._followed)

    async def reload_ranges(self, stream_ids: Iterable[int]) -> None:
        """Reload from the metadata database the object ranges of the streams held or followed
        here (cluster mode: another node's compaction moved their data to new objects, which
        changes no offset, so nothing else would make this node look again)."""
        state = self.state
        wanted = [sid for sid in stream_ids if sid in state.streams or sid in self._followed]
        # One query per chunk, not per stream: after the first writes to 10,000 partitions each
        # compaction swap named thousands of streams, and each broker reloaded them one by one.
        for first in range(0, len(wanted), RELOAD_CHUNK):
            chunk = wanted[first : first + RELOAD_CHUNK]
            async with state.commit_lock:  # as open_stream: no stream is re-opened meanwhile
                rows = await state.db(state.meta.load_ranges, chunk)
                by_stream: dict[int, list[RangeRow]] = {sid: [] for sid in chunk}
                for row in rows:
                    by_stream[row.stream_id].append(row)
                for sid, ranges in by_stream.items():
                    stream = state.streams.get(sid) or self._followed.get(sid)
                    if stream is not None:
                        stream.set_ranges(ranges)

    async def recorded_ends(self, stream_ids: Sequence[int]) -> dict[int, int]:
        """The end offsets of streams as the metadata database records them (cluster mode: of
        streams another node may hold; what it acknowledged since may be missing), in one query;
        a stream that does not exist is left out."""
        state = self.state
        ends = await state.db(state.meta.stream_ends, stream_ids)
        return {stream_id: end for stream_id, (end, _) in ends.items()}

    def stream_ids(self) -> list[int]:
        return list(self.state.streams)

    async def trim(self, stream_id: int, new_start_offset: int) -> None:
        state = self.state
        stream = state.stream(stream_id)
        new_start = min(new_start_offset, stream.confirmed_end)
        if new_start <= stream.start:
            return
        await state.db(state.meta.trim_stream, stream_id, new_start, stream.fence)
        stream.start = max(stream.start, new_start)

    def wait_for_data(self, wanted: Iterable[tuple[int, int]]) -> DataWatch:
        return watch_streams(wanted, self._waiters)

    def _waiters(self, stream_id: int) -> tuple[DataWaiters, int] | None:
        stream = self.state.streams.get(stream_id)
        return None if stream is None else (stream.waiters, stream.confirmed_end)

    # Append ----------------------------------------------------------------------------------

    async def append(self, stream_id: int, payload: bytes | memoryview, record_count: int) -> int:
        payload = self._check_append(stream_id, payload, record_count)
        await self.wait_for_room()
        holder = self.state.stream(stream_id)
        base, durable = self._append_nowait(stream_id, payload, record_count)
        await self._acknowledged(stream_id, holder, durable)
        return base

    async def wait_for_room(self) -> None:
        """Backpressure before :meth:`start_append`: returns at once unless the WAL is full, then
        waits (bounded by ``s3stream.append.timeout.ms``; raises StorageUnavailable)."""
        if self.state.backlog_bytes() > self.state.settings.wal_capacity_bytes:
            await self._wait_for_space()

    def start_append(
        self, stream_id: int, payload: bytes | memoryview, record_count: int, crc: int | None = None
    ) -> tuple[int, PendingAppend]:
        """Assign the batch its offsets now, without suspending, and return them with what to
        await for the acknowledgement (durable, stream still held; raises as :meth:`append`).

        For callers whose order of appends must follow their own order of checks (idempotent
        sequences): nothing can come between the check and the offsets. Await the second item.
        """
        payload = self._check_append(stream_id, payload, record_count)
        holder = self.state.stream(stream_id)
        base, durable = self._append_nowait(stream_id, payload, record_count, crc)
        return base, _PendingAppend(self, stream_id, holder, durable)

    async def _acknowledged(self, stream_id: int, holder: StreamState, durable: asyncio.Future[None]) -> None:
        # A SharedFuture: a cancelled caller cannot cancel the acknowledgement of the others.
        await durable
        self._check_still_held(stream_id, holder)

    def _check_still_held(self, stream_id: int, holder: StreamState) -> None:
        """Re-check ownership before acknowledging: a batch object may commit for the other streams
        it holds while this one was fenced (its data left out of the commit) or closed here."""
        if self.state.streams.get(stream_id) is not holder or holder.closing:
            message = f"stream {stream_id} changed owner before the append was durable"
            raise StreamFenced(message, (stream_id,))

    async def append_many(self, items: Sequence[tuple[int, bytes | memoryview, int]]) -> list[int]:
        """Append several ``(stream_id, payload, record_count)`` batches (e.g. the partitions of one
        produce request) with one wait: they share a WAL group or batch object. Validation happens
        for all items before any is appended; returns the base offsets in item order."""
        checked = [(sid, self._check_append(sid, payload, count), count) for sid, payload, count in items]
        if self.state.backlog_bytes() > self.state.settings.wal_capacity_bytes:
            await self._wait_for_space()
        for sid, _, _ in checked:
            self.state.stream(sid)
        bases: list[int] = []
        waits: dict[int, asyncio.Future[None]] = {}
        holders = {sid: self.state.stream(sid) for sid, _, _ in checked}
        for sid, payload, count in checked:
            base, durable = self._append_nowait(sid, payload, count)
            bases.append(base)
            waits[id(durable)] = durable
        for durable in waits.values():
            await durable
        for sid, holder in holders.items():
            self._check_still_held(sid, holder)
        return bases

    def _check_append(
        self, stream_id: int, payload: bytes | memoryview, record_count: int
    ) -> bytes | memoryview:
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes-like, not {type(payload).__name__}")
        payload = kept_payload(payload)
        if not isinstance(record_count, int) or record_count <= 0:
            raise ValueError(f"record_count must be a positive integer, not {record_count!r}")
        if not self._started or self._closed:
            raise StorageUnavailable("the store is not open")
        if self.state.stream(stream_id).closing:
            raise StreamFenced(f"stream {stream_id} is being handed over", (stream_id,))
        return payload

    def _append_nowait(
        self, stream_id: int, payload: bytes | memoryview, record_count: int, crc: int | None = None
    ) -> tuple[int, asyncio.Future[None]]:
        """Assign offsets and queue the batch (``crc``: its CRC32C, if known); returns its base and
        the future of its durability."""
        state = self.state
        stream = state.stream(stream_id)
        wal = state.wal
        if wal is not None:
            wal.raise_failure()  # before the offsets and the cache: a refused append leaves no trace
        base = stream.next_end
        stream.next_end = base + record_count
        block = state.log_cache.add(stream_id, StoredBatch(base, record_count, payload, crc))
        if block.uploaded is None:
            self._open_block(block)
        block.appends += 1
        if wal is not None:
            group = wal.append(stream_id, base, record_count, payload, crc)
            group.ends[stream_id] = stream.next_end
            block.written = group.future
            if block.nbytes >= state.settings.upload_bytes:
                self._seal()
            return base, group.future
        uploaded = block.uploaded
        assert uploaded is not None
        state.pending_upload_bytes += len(payload)
        if block.nbytes >= state.settings.object_batch_bytes:
            self._seal()
        return base, uploaded

    def _open_block(self, block: Block) -> None:
        state = self.state
        loop = asyncio.get_running_loop()
        block.uploaded = SharedFuture(loop=loop)
        block.generation = state.generation
        if not state.local_wal:
            self._schedule_batch_start()
            return
        # By id, not the block: the timer outlives the block whenever size seals it first, and a
        # block it held could not be freed (nor its lent request buffers) until the timer fired —
        # at the 10 s default interval that kept gigabytes alive past the log cache's bound.
        loop.call_later(state.settings.upload_interval_ms / 1000, self._seal_if_current, block.block_id)

    def _schedule_batch_start(self) -> None:
        """Object WAL: start the current batch object when the pacer allows (see batching.py). A
        start due now still runs on the next loop iteration, so that the appends of this one (the
        partitions of one produce request, requests read together) share the object."""
        if self._batch_start is not None or self._closed:
            return
        wait = self.uploader.pacer.wait(time.monotonic())
        if wait is None:
            return  # every slot busy: the end of an upload calls again
        self._batch_start = asyncio.get_running_loop().call_later(wait, self._start_batch)

    def _start_batch(self) -> None:
        self._batch_start = None
        if self._closed or not self.state.log_cache.current.nbytes:
            return
        wait = self.uploader.pacer.wait(time.monotonic())
        if wait is None:
            return
        if wait > 0:
            self._schedule_batch_start()
            return
        self._seal()

    def _seal_if_current(self, block_id: int) -> None:
        current = self.state.log_cache.current
        if current.block_id == block_id and current.nbytes and not self._closed:
            self._seal()

    def _seal(self) -> Block:
        state = self.state
        block = state.log_cache.seal()
        if state.wal is not None and state.wal.failure is None:
            block.wal_marker = state.wal.roll()
        if block.uploaded is None:
            block.uploaded = asyncio.get_running_loop().create_future()
        self.uploader.submit(block)
        return block

    async def _wait_for_space(self) -> None:
        """Backpressure: wait (bounded) until uploads bring the backlog under the WAL capacity."""
        state = self.state
        if state.log_cache.current.nbytes:
            self._seal()
        capacity = state.settings.wal_capacity_bytes
        deadline = time.monotonic() + state.settings.append_timeout_ms / 1000
        while state.backlog_bytes() > capacity:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StorageUnavailable(
                    f"the WAL is full ({state.backlog_bytes()} of {capacity} bytes) and "
                    f"uploads to {state.objects.description} are not keeping up"
                )
            state.space_freed.clear()
            await set_or_timeout(state.space_freed, remaining)

    def _on_wal_commit(self, group: Group) -> None:
        state = self.state
        state.metrics.appends.inc(group.appends)
        state.metrics.append_bytes.inc(group.payload_bytes)
        for stream_id, end in group.ends.items():
            state.confirm(stream_id, end)

    async def _wait_uploaded(self, blocks: list[Block]) -> None:
        pending = [b.uploaded for b in blocks if b.uploaded is not None and not b.committed]
        for future in pending:
            await asyncio.shield(future)

    def not_uploaded(self, stream_ids: Iterable[int]) -> list[int]:
        streams = self.state.streams
        return [
            sid
            for sid in stream_ids
            if (held := streams.get(sid)) is not None and held.confirmed_end > held.committed_end
        ]

    async def flush(self, stream_ids: Iterable[int] | None = None) -> None:
        log_cache = self.state.log_cache
        wanted = None if stream_ids is None else set(stream_ids)
        current = log_cache.current
        if current.nbytes and (wanted is None or wanted & current.runs.keys()):
            self._seal()
        blocks = [
            b
            for b in log_cache.blocks
            if b.sealed and not b.committed and (wanted is None or wanted & b.runs.keys())
        ]
        await self._wait_uploaded(blocks)

    # Read ------------------------------------------------------------------------------------

    async def fetch(
        self, stream_id: int, start_offset: int, max_bytes: int, end_offset: int | None = None
    ) -> list[StoredBatch]:
        state = self.state
        stream = state.stream(stream_id)
        if start_offset < stream.start or start_offset > stream.confirmed_end:
            raise OffsetOutOfRange(stream_id, start_offset, stream.start, stream.confirmed_end)
        limit = stream.confirmed_end if end_offset is None else min(end_offset, stream.confirmed_end)
        result: list[StoredBatch] = []
        size = 0
        offset = start_offset
        candidates: list[StoredBatch]
        while offset < limit:
            run = state.log_cache.lookup(stream_id, offset)
            if run is not None:
                state.metrics.cache_read("log", True)
                candidates, first = run.batches, run.index_of(offset)
            else:
                try:
                    candidates = await state.reader.read(
                        stream_id, stream.ranges, stream.range_starts, offset, max_bytes - size
                    )
                except ObjectNotFound:
                    # The object was swapped out by compaction (here or by another node sharing
                    # the metadata DB): refresh this stream's ranges from the DB and retry once.
                    await self._reload_ranges(stream_id, stream)
                    candidates = await state.reader.read(
                        stream_id, stream.ranges, stream.range_starts, offset, max_bytes - size
                    )
                first = 0
            offset, size, more = take_batches(candidates, first, offset, limit, max_bytes, result, size)
            if not more:
                break
        return result

    async def read_snapshot(
        self, stream_id: int, start_offset: int, max_bytes: int, max_age_s: float = 0.05
    ) -> tuple[StreamInfo, list[StoredBatch]]:
        """Read a stream this store does not hold (cluster mode: another broker leads it) straight
        from object storage, as the metadata database last recorded it (at most ``max_age_s`` old):
        any broker can so serve any partition's committed data, e.g. to consumers in its zone.
        Returns the stream's offsets with the batches (none when ``start_offset`` is its end).

        Raises:
            StreamNotFound: no such stream.
            OffsetOutOfRange: ``start_offset`` is outside the committed offsets.
        """
        state = self.state
        cached = self._views.get(stream_id)
        now = time.monotonic()
        stale = cached is not None and start_offset > cached[0].committed_end  # others appended since
        if cached is None or stale or now - cached[1] > max_age_s:
            view = await self._read_view(stream_id)
            self._views[stream_id] = cached = (view, now)
            if len(self._views) > 4096:  # bounded: forget the oldest views
                for sid in sorted(self._views, key=lambda k: self._views[k][1])[:1024]:
                    del self._views[sid]
        view = cached[0]
        info = StreamInfo(stream_id, view.start, view.committed_end)
        if not view.start <= start_offset <= view.committed_end:
            raise OffsetOutOfRange(stream_id, start_offset, view.start, view.committed_end)
        result: list[StoredBatch] = []
        size, offset, limit = 0, start_offset, view.committed_end
        while offset < limit:
            candidates = await state.reader.read(
                stream_id, view.ranges, view.range_starts, offset, max_bytes - size
            )
            offset, size, more = take_batches(candidates, 0, offset, limit, max_bytes, result, size)
            if not more:
                break
        return info, result

    async def _reload_ranges(self, stream_id: int, stream: StreamState) -> None:
        state = self.state
        async with state.commit_lock:
            stream.set_ranges(await state.db(state.meta.load_ranges, [stream_id]))

    async def _read_view(self, stream_id: int) -> StreamState:
        """A read-only view of a stream this store does not hold, from the metadata database: the
        end offset first, then the ranges (committed with the end in one transaction, so they cover
        at least up to it). Not registered: the store never writes through it."""
        state = self.state
        start, end = await state.db(state.meta.load_stream, stream_id)
        view = StreamState(start, end, epochs=await state.db(state.meta.epoch_history, stream_id))
        view.set_ranges(await state.db(state.meta.load_ranges, [stream_id]))
        return view

    async def rewrite(self, stream_id: int, transform: BatchTransform) -> int:
        self.state.stream(stream_id)  # StreamNotFound for an unknown stream
        return await self.compactor.rewrite(stream_id, transform)

    async def locate(self, stream_id: int, start_offset: int, end_offset: int) -> list[ObjectSlice]:
        stream = self._readable(stream_id)
        if start_offset < stream.start or end_offset > stream.committed_end or start_offset > end_offset:
            raise OffsetOutOfRange(
                stream_id,
                start_offset if start_offset < stream.start else end_offset,
                stream.start,
                stream.committed_end,
            )
        try:
            return await self._slices(stream_id, stream, start_offset, end_offset)
        except ObjectNotFound:
            # Compaction (here, or on another node sharing the metadata DB) replaced an object and
            # deleted it between reading the ranges and reading that object's index: the ranges
            # are stale. Reload them from the DB and look again, once.
            await self._reload_ranges(stream_id, stream)
            return await self._slices(stream_id, stream, start_offset, end_offset)

    async def _slices(
        self, stream_id: int, stream: StreamState, start_offset: int, end_offset: int
    ) -> list[ObjectSlice]:
        slices = []
        index = max(bisect.bisect_right(stream.range_starts, start_offset) - 1, 0)
        for rng in stream.ranges[index:]:
            if rng.start_offset >= end_offset:
                break
            if rng.end_offset <= start_offset:
                continue
            blocks = [
                b
                for b in await self.state.reader.blocks_of(rng)
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


class _PendingAppend:
    """One append's acknowledgement (see :class:`PendingAppend`): the WAL group's or batch
    object's future, which an upload failure fails at once, and the ownership re-check after it."""

    __slots__ = ("_durable", "_holder", "_store", "_stream_id")

    def __init__(
        self, store: S3StreamStore, stream_id: int, holder: StreamState, durable: asyncio.Future[None]
    ) -> None:
        self._store = store
        self._stream_id = stream_id
        self._holder = holder
        self._durable = durable

    def failed(self) -> bool:
        durable = self._durable
        return durable.done() and (durable.cancelled() or durable.exception() is not None)

    def __await__(self) -> Generator[Any, None, None]:
        return self._store._acknowledged(self._stream_id, self._holder, self._durable).__await__()
