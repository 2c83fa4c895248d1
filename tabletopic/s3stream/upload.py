"""Uploads: sealed LogCache blocks become stream-set and stream objects, registered together with
the streams' new end offsets in one metadata transaction.

Local WAL: an upload is retried until it succeeds (the data is safe on disk), then the WAL segments
it covered are deleted. Object WAL: the upload *is* the acknowledgement; a failure fails every
append not yet acknowledged and rewinds the streams so no offset is left as a gap.

The :class:`Uploader` works on the :class:`~tabletopic.s3stream.state.StoreState` the store hands it;
the store gives it sealed blocks with :meth:`Uploader.submit` and runs :meth:`Uploader.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable

from tabletopic import crashpoints
from tabletopic.log_limit import RateLimitedLog
from tabletopic.s3stream.batching import BatchPacer
from tabletopic.s3stream.cache import Block
from tabletopic.s3stream.db import Layouts, NewObject, ObjectKind
from tabletopic.s3stream.objects import BuiltObject, build_object
from tabletopic.s3stream.reserved_keys import ReservedKeys
from tabletopic.s3stream.state import StoreState, StreamState
from tabletopic.s3stream.streams import StorageUnavailable, StoredBatch, StreamError, StreamFenced
from tabletopic.s3stream.wal import RollMarker

log = logging.getLogger(__name__)
# An object store that is down (or a full disk under a local one) fails every retry, one a second:
# one line per half minute says it goes on, with how many were held back.
RETRY_LOG = RateLimitedLog(log, interval_s=30.0)


INLINE_BUILD_BYTES = 256 * 1024  # uploads up to this size are built on the event loop


class StaleUpload(StorageUnavailable):
    """An earlier batch object failed, so this one (whose offsets follow it) must not commit."""


class Uploader:
    """Turns sealed blocks into committed objects, in the order they were sealed.

    Local WAL: one upload at a time from a queue (:meth:`run`). Object WAL: an upload starts at
    :meth:`submit` when the :class:`~tabletopic.s3stream.batching.BatchPacer` has a free slot;
    otherwise the block waits and joins the next upload (with every other block that waits) when a
    slot frees. ``in_flight`` holds the object-WAL uploads under way; the store cancels them when it
    closes. ``on_slot_free`` is called when an object-WAL upload ends (the store starts its next
    batch object then).
    """

    def __init__(self, state: StoreState) -> None:
        self.state = state
        settings = state.settings
        self.keys = ReservedKeys(state)
        self.pacer = BatchPacer(settings.object_max_in_flight, settings.object_batch_ms / 1000)
        self.in_flight: set[asyncio.Future[None]] = set()
        self.on_slot_free: Callable[[], None] = lambda: None
        self._queue: asyncio.Queue[Block] = asyncio.Queue()
        self._waiting: list[Block] = []
        self._previous: asyncio.Future[None] | None = None  # settles when the last upload did

    def submit(self, block: Block) -> None:
        """Queue a sealed block for upload (its ``uploaded`` future resolves once committed)."""
        if self.state.local_wal:
            self._queue.put_nowait(block)
            return
        self._waiting.append(block)
        self._start_waiting()

    async def run(self) -> None:
        """The local WAL's upload loop (the store runs it as a task until it closes)."""
        while True:
            blocks = [await self._queue.get()]
            while not self._queue.empty():  # uploads lagging: merge what waits into one upload
                blocks.append(self._queue.get_nowait())
            await self._upload_until_done(blocks)
            # Awaiting the next block would otherwise keep this upload's blocks, and the request
            # buffers they lend, alive for as long as the store stays idle.
            del blocks

    def _start_waiting(self) -> None:
        """Object WAL: start one upload of every waiting block if a slot is free. The PUTs of
        several uploads overlap; their commits (and failures) happen in order of start."""
        if not self._waiting or not self.pacer.has_slot():
            return
        blocks, self._waiting = self._waiting, []
        loop = asyncio.get_running_loop()
        previous = self._previous
        if previous is None:
            previous = loop.create_future()
            previous.set_result(None)
        self.pacer.started(time.monotonic())
        settled: asyncio.Future[None] = loop.create_future()
        task = asyncio.ensure_future(self._upload_or_fail(blocks, self._turn_after(previous, blocks)))
        self.in_flight.add(task)
        task.add_done_callback(functools.partial(self._upload_settled, settled=settled))
        self._previous = settled

    def _turn_after(
        self, previous: asyncio.Future[None], blocks: list[Block]
    ) -> Callable[[], Awaitable[None]]:
        async def turn() -> None:
            await asyncio.shield(previous)
            if any(b.generation != self.state.generation for b in blocks):
                raise StaleUpload("an earlier batch object failed")

        return turn

    def _upload_settled(self, task: asyncio.Future[None], settled: asyncio.Future[None]) -> None:
        self.in_flight.discard(task)
        self.pacer.finished()
        if not settled.done():
            settled.set_result(None)
        if not task.cancelled() and task.exception() is not None:
            log.error("batch object upload task failed: %s", task.exception())
        if not task.cancelled():
            self._start_waiting()
            self.on_slot_free()

    async def _upload_until_done(self, blocks: list[Block]) -> None:
        """Local WAL: the data is safe on disk, so retry (with backoff) until the upload succeeds."""
        delay = 0.1
        failed_since: float | None = None
        while True:
            if (taken_over := self._taken_over()) is not None:
                for block in blocks:  # the recoverer commits what they acknowledged
                    self._fail_block(block, taken_over)
                return
            try:
                await self._upload(blocks)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._taken_over() is not None:
                    continue  # no retry: the blocks fail at the top of the loop
                failed_since = failed_since or time.monotonic()
                RETRY_LOG.error(
                    "upload", "upload to %s failed, retrying (at most a second apart): %s",
                    self.state.objects.description, exc,
                )  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        if failed_since is not None:
            log.info(
                "upload to %s succeeded again after %.1f s of failures",
                self.state.objects.description, time.monotonic() - failed_since,
            )  # fmt: skip
        released = 0
        for block in blocks:
            if isinstance(block.wal_marker, RollMarker):
                released = max(released, await asyncio.shield(block.wal_marker.done))
        wal = self.state.wal
        if released and wal is not None:
            await wal.release(released)
            self.state.space_freed.set()

    async def _upload_or_fail(
        self, blocks: list[Block], turn: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Object WAL: the upload is the acknowledgement; on failure fail every append not yet
        acknowledged (their offsets would otherwise leave a gap) and rewind the streams."""
        state = self.state
        live = [b for b in blocks if b.generation == state.generation]
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
            log.error("batch object upload to %s failed: %s", state.objects.description, exc)
            error = exc if isinstance(exc, StorageUnavailable) else StorageUnavailable(str(exc))
            state.generation += 1
            failed = [*live, *[b for b in state.log_cache.blocks if not b.committed and b not in live]]
            for block in failed:
                self._fail_block(block, error)
            for stream in state.streams.values():
                stream.next_end = stream.confirmed_end

    def _fail_block(self, block: Block, error: Exception) -> None:
        self.state.log_cache.discard(block)
        self._release_pending(block)
        if block.uploaded is not None and not block.uploaded.done():
            block.uploaded.set_exception(error)
            block.uploaded.exception()

    async def _upload(self, blocks: list[Block], turn: Callable[[], Awaitable[None]] | None = None) -> None:
        """Write ``blocks`` as objects and commit them. With ``turn`` (object WAL, several uploads
        in flight) the PUTs overlap with earlier uploads, but the commit, and the handling of a
        failure, wait until ``turn()`` says every earlier upload has committed or failed."""
        state = self.state
        started = time.perf_counter()
        if state.wal is not None:
            await _written(blocks)
        runs: dict[int, list[StoredBatch]] = {}
        sizes: dict[int, int] = {}
        # The ownership each stream's data was appended under: the commit checks that one (a
        # stream dropped or reopened meanwhile is left out, as a fenced one).
        holders: dict[int, StreamState] = {}
        for block in blocks:
            for stream_id, run in block.runs.items():
                holder = state.streams.get(stream_id)
                if holder is None or run.stale:
                    continue
                batches = run.batches
                if state.wal is not None and run.end > holder.confirmed_end:
                    # Appends of a WAL group that failed: never acknowledged, never uploaded.
                    batches = [b for b in batches if b.next_offset <= holder.confirmed_end]
                    if not batches:
                        continue
                holders[stream_id] = holder
                runs.setdefault(stream_id, []).extend(batches)
                size = run.nbytes if batches is run.batches else sum(len(b.payload) for b in batches)
                sizes[stream_id] = sizes.get(stream_id, 0) + size
        big = [(sid, b) for sid, b in runs.items() if sizes[sid] >= state.settings.split_bytes]
        big_ids = {sid for sid, _ in big}
        small = [(sid, b) for sid, b in runs.items() if sid not in big_ids]
        layouts: Layouts[StoredBatch] = [(ObjectKind.STREAM_SET, small)] if small else []
        layouts += [(ObjectKind.STREAM_OBJECT, [item]) for item in big]
        reserved: list[tuple[int, str]] = []
        try:
            built: list[BuiltObject] = []
            try:
                if layouts:
                    reserved = await self.keys.take([kind for kind, _ in layouts])
                    self._timed("reserve", started)
                    built = await self._store(layouts, reserved)
                if turn is not None:
                    phase = time.perf_counter()
                    await turn()
                    self._timed("turn", phase)
            except asyncio.CancelledError:
                raise  # closing: reserved objects stay `prepared` and garbage collection takes them
            except StaleUpload:
                await state.db(state.meta.abandon_prepared, [oid for oid, _ in reserved])
                raise
            except Exception:
                if reserved:
                    await state.db(state.meta.abandon_prepared, [oid for oid, _ in reserved])
                if turn is not None:
                    # Report the failure in commit order: an earlier upload may still commit, and the
                    # rewind must not go below what it acknowledges (raises StaleUpload if it failed).
                    await turn()
                raise
            if layouts:
                phase = time.perf_counter()
                await self._commit(reserved, built, runs, holders)
                self._timed("commit", phase)
        finally:
            state.inflight_objects.difference_update(oid for oid, _ in reserved)
        for block in blocks:
            block.committed = True
            self._release_pending(block)
            if not state.local_wal:
                state.metrics.appends.inc(block.appends)
                state.metrics.append_bytes.inc(block.nbytes)
                for sid, run in block.runs.items():
                    state.confirm(sid, run.end)
            if block.uploaded is not None and not block.uploaded.done():
                block.uploaded.set_result(None)
        state.log_cache.evict()
        state.metrics.upload_seconds.observe(time.perf_counter() - started)

    async def _store(
        self, layouts: Layouts[StoredBatch], reserved: list[tuple[int, str]]
    ) -> list[BuiltObject]:
        """Build and PUT the reserved objects (concurrently). A small upload (the object WAL's
        usual batch) is built on the loop: indexing a few hundred KiB takes less than handing it to
        a thread and back, which on a busy machine costs milliseconds on every acknowledgement."""
        phase = time.perf_counter()
        block_bytes = self.state.settings.block_bytes
        size = sum(len(b.payload) for _, group in layouts for _, batches in group for b in batches)
        if size <= INLINE_BUILD_BYTES:
            built = [build_object(group, block_bytes) for _, group in layouts]
        else:
            built = await asyncio.to_thread(
                lambda: [build_object(group, block_bytes) for _, group in layouts]
            )
        phase = self._timed("build", phase)
        crashpoints.crash_point("upload.before_put")
        await asyncio.gather(
            *(self.state.objects.put(key, obj.parts) for (_, key), obj in zip(reserved, built, strict=True))
        )
        self._timed("put", phase)
        crashpoints.crash_point("upload.after_put")
        return built

    async def _commit(
        self,
        reserved: list[tuple[int, str]],
        built: list[BuiltObject],
        runs: dict[int, list[StoredBatch]],
        holders: dict[int, StreamState],
    ) -> None:
        """One transaction: the objects become committed and the streams' ends advance.

        Streams found fenced (cluster mode: a newer owner opened them) are left out and the commit
        is retried for the others: their bytes stay in the object unreferenced, and their appends
        are not acknowledged (the store re-checks ownership after the commit). So are streams no
        longer held here as when the upload began: an earlier upload found them fenced and dropped
        them, and without their fence this commit would move the new owner's end offset over
        batches nobody acknowledged."""
        state = self.state
        fenced: set[int] = {sid for sid, holder in holders.items() if state.streams.get(sid) is not holder}
        while True:
            new_objects = [
                NewObject(oid, obj.size, [r for r in obj.ranges if r.stream_id not in fenced])
                for (oid, _), obj in zip(reserved, built, strict=True)
            ]
            ends = {sid: batches[-1].next_offset for sid, batches in runs.items() if sid not in fenced}
            async with state.commit_lock:
                if (taken_over := self._taken_over()) is not None:
                    raise taken_over
                try:
                    fences = {sid: f for sid in ends if (f := holders[sid].fence) is not None}
                    await state.db(state.meta.commit_upload, new_objects, ends, fences)
                except StreamFenced as exc:
                    if not exc.stream_ids or fenced.issuperset(exc.stream_ids):
                        raise
                    self._drop_fenced(exc)
                    fenced.update(exc.stream_ids)
                    continue
                crashpoints.crash_point("upload.after_commit")
                for (oid, key), obj in zip(reserved, new_objects, strict=True):
                    state.add_ranges(oid, key, obj.size, obj.ranges)
                    state.metrics.upload_bytes.inc(obj.size)
            break
        for sid, end in ends.items():
            stream = state.streams.get(sid)
            if stream is not None:
                stream.committed_end = max(stream.committed_end, end)

    def _timed(self, phase: str, since: float) -> float:
        """Record the time since ``since`` as ``phase`` of an upload; returns now."""
        now = time.perf_counter()
        self.state.metrics.upload_phase_seconds.labels(phase).observe(now - since)
        return now

    def _taken_over(self) -> StreamError | None:
        """Shared WAL taken over by another broker: the error to fail uploads with, else None.

        Everything this broker acknowledged is in that WAL, which the recoverer commits; what it
        holds beyond is appends whose group failed the fence check, never acknowledged. Committed
        under a stream this broker opened after the recoverer read the WAL (its ownership still
        valid there), they would become records nobody acknowledged."""
        wal = self.state.wal
        return None if wal is None else wal.taken_over

    def _drop_fenced(self, exc: StreamFenced) -> None:
        """Deposed: those streams belong to a newer owner, who read their end offsets without this
        upload; forget them so that no later upload trips over them again."""
        state = self.state
        for sid in exc.stream_ids:
            lost = state.streams.pop(sid, None)
            state.log_cache.forget_stream(sid)
            if lost is not None:
                lost.waiters.wake_all()

    def _release_pending(self, block: Block) -> None:
        state = self.state
        if not state.local_wal and not block.released:
            block.released = True
            state.pending_upload_bytes -= block.nbytes
            state.space_freed.set()


async def _settle(turn: Callable[[], Awaitable[None]]) -> None:
    """Wait for an upload's turn, ignoring whether earlier uploads failed."""
    try:
        await turn()
    except StaleUpload:
        pass


async def _written(blocks: list[Block]) -> None:
    """Local WAL: wait until the WAL groups of ``blocks`` are written or failed. A block is sealed
    on a timer, so its upload may start before its last group's fsync; what a failed group held
    (a disk error, or the shared WAL's fence check) must be known before anything is uploaded:
    those appends were never acknowledged. What was acknowledged before the failure is still
    uploaded."""
    for block in blocks:
        if block.written is not None:
            with contextlib.suppress(Exception):
                await block.written
