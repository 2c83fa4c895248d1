"""The local write-ahead log: reused, preallocated segment files written around the page cache
with group commit.

Every append joins the *current group*; at the end of the event-loop iteration the group is
written and covered by one ``fdatasync``, and its single future resolves (no task or executor
future per group). A small group (``INLINE_BYTES``) is written by the loop itself: the loop waits
one device write, about 0.1-0.2 ms, which is less than the two thread wake-ups of a hand-over and
the latency of a produce at low rates. A larger one goes to the WAL's writer thread, and appends
arriving meanwhile form the next group, so the fsync rate adapts to the load.

The writes go through one page-aligned buffer with ``O_DIRECT`` (see direct_io) into files whose
blocks already exist: the first segment is zero-filled, a new one is preallocated to
``s3stream.wal.segment.bytes``, and a segment whose data is in object storage is renamed into a
spare and reused rather than deleted. The kernel then neither copies the data into fresh page-cache
pages nor allocates blocks nor journals a growing file at each fsync (together more CPU than the
Kafka protocol path, and 6-27 ms fsyncs of a few MB). The next segment is opened, headed and
fsynced ahead of need on the WAL's executor, so a roll (one per upload) only switches files. The
frame format (wal_format) ties each frame to its segment and offset, so the zeros or old frames
past the written end of a reused file never replay.

A group is one frame. Replay of the last segment holding frames stops at its first frame that is
short or fails its CRC (the tail after the last acknowledged group); segments after it hold no
frames (opened ahead); a segment before it must end with its end frame, or acknowledged data is
damaged and the WAL refuses to open.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import mmap
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tabletopic import crashpoints
from tabletopic.config import StartupError
from tabletopic.s3stream.direct_io import (
    BLOCK,
    AlignedBuffer,
    BlockWriter,
    fsync_directory,
    open_direct,
    write_zeros,
)
from tabletopic.s3stream.objects import IN_PLACE_AVERAGE_BYTES
from tabletopic.s3stream.settings import WAL_DIR, WAL_SEGMENT_BYTES, MiB
from tabletopic.s3stream.streams import StorageUnavailable, StreamError
from tabletopic.s3stream.wal_format import (
    FRAME,
    LEGACY_SUFFIX,
    RECORD,
    SEGMENT_SUFFIX,
    SPARE_SUFFIX,
    SegmentScan,
    WalRecord,
    end_frame,
    frame_header,
    header,
    scan_legacy,
    scan_segment,
    segment_name,
)

log = logging.getLogger(__name__)

# Reused segment files kept for later segments (more are deleted): the WAL's disk use is its
# ``bytes_used`` rounded up to whole segments plus at most this many spare segments.
MAX_SPARES = 2
# The writer's aligned buffer: groups larger than this are written in several pieces.
WRITE_BUFFER_BYTES = 4 << 20
# Groups up to this size are written by the event loop itself (see _hand_over).
INLINE_BYTES = 64 << 10


class WalCorruption(StreamError):
    """Acknowledged data in the WAL is damaged; the store refuses to start rather than lose it."""


class SharedFuture(asyncio.Future[None]):
    """A future awaited by many appends at once (a group or a batch object). It refuses
    cancellation: a cancelled caller then gets CancelledError when the future completes, instead of
    cancelling everyone else's acknowledgement. Cheaper than ``asyncio.shield`` per append."""

    def cancel(self, msg: object = None) -> bool:
        return False


@dataclass
class Group:
    """Appends covered by one fsync. ``ends`` maps stream id -> end offset after the group."""

    future: asyncio.Future[None]
    # (stream id, base offset, record count, payload, payload CRC32C or None) tuples: cheaper than
    # objects on the hot path.
    records: list[tuple[int, int, int, bytes | memoryview, int | None] | RollMarker] = field(
        default_factory=list
    )
    ends: dict[int, int] = field(default_factory=dict)
    nbytes: int = 0
    payload_bytes: int = 0
    appends: int = 0


@dataclass
class RollMarker:
    """Everything queued before it goes to the old segment, everything after to a new one."""

    done: asyncio.Future[int]


def segment_files(directory: Path) -> list[Path]:
    """The WAL's segment files in ``directory``, of both formats (spares not included)."""
    return [p for suffix in (SEGMENT_SUFFIX, LEGACY_SUFFIX) for p in directory.glob(f"*{suffix}")]


def read_segment(path: Path, index: int) -> SegmentScan:
    """Scan a segment through a read-only mapping (the preallocated space past its frames is never
    read) and copy the records out: the file may be reused and overwritten while they live on."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size < BLOCK:
            return SegmentScan([], BLOCK, False)
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            scan = scan_segment(mapped, index)
            copied = [
                WalRecord(r.stream_id, r.base_offset, r.record_count, bytes(r.payload)) for r in scan.records
            ]
            for record in scan.records:
                if isinstance(record.payload, memoryview):
                    record.payload.release()
    return SegmentScan(copied, scan.end, scan.sealed)


def _index_of(path: Path) -> int:
    return int(path.name.split(".", 1)[0])


def _write_at(fd: int, position: int, data: bytes, buffer: AlignedBuffer) -> None:
    """Write ``data`` at ``position`` (a header or an end frame), keeping the bytes before it in
    its block; not synced."""
    out = BlockWriter(fd, position, buffer)
    out.write(data)
    out.flush()


class LocalWal:
    def __init__(
        self,
        directory: Path,
        segment_bytes: int,
        on_commit: Callable[[Group], None],
        on_fsync: Callable[[float], None] | None = None,
        after_sync: Callable[[], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        # Shared WAL: the fence check, run after each group's fsync and before it is acknowledged
        # (raises to fail the group and stop the WAL; see wal_fence).
        self._after_sync = after_sync
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self._on_commit = on_commit
        self._on_fsync = on_fsync
        # Segment releases (rename to spare or delete) run here, off the loop and the writer thread.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3stream-wal")
        # index -> bytes written (header and frames); shared with the WAL thread under the lock.
        self._segments: dict[int, int] = {}
        self._legacy: set[int] = set()  # previous-format segments: deleted when released, never reused
        self._spares: list[Path] = sorted(self.directory.glob(f"*{SPARE_SUFFIX}"))
        # The segment after the current one, opened ahead of need: (index, fd).
        self._next: tuple[int, int] | None = None
        self._prepare_lock = threading.Lock()  # guards _next and its preparation
        self._prepare_error: OSError | None = None  # why the last preparation failed, for the roll
        self._buffer = AlignedBuffer(WRITE_BUFFER_BYTES)  # the writer's (one writer at a time)
        self._header_buffer = AlignedBuffer(BLOCK)  # the executor's, for headers of next segments
        self._segments_lock = threading.Lock()
        self._disk_bytes = 0
        self._fd = -1
        self._out: BlockWriter | None = None
        self._index = 0
        self._group: Group | None = None
        self._idle = asyncio.Event()  # set while nothing is queued or being written
        self._idle.set()
        self._writing = False  # a group is with the writer thread (or about to be handed over)
        self._queue: queue.SimpleQueue[Group | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None
        self.pending_bytes = 0

    @staticmethod
    def holds_data(directory: Path) -> bool:
        """Whether ``directory`` has WAL segments that may hold data (cheap; no replay)."""
        directory = Path(directory)
        return directory.is_dir() and any(p.stat().st_size for p in segment_files(directory))

    def remove_segments(self) -> None:
        """Delete every segment and spare (after close, once everything is in object storage)."""
        for path in [*segment_files(self.directory), *self.directory.glob(f"*{SPARE_SUFFIX}")]:
            path.unlink(missing_ok=True)
        self._spares.clear()

    # Recovery ------------------------------------------------------------------------------------

    def replay(self) -> Iterator[WalRecord]:
        """Yield every valid record of every segment in write order (blocking; call before start).
        Closes segments left open by a crash; raises WalCorruption for damage elsewhere."""
        paths = sorted(segment_files(self.directory), key=_index_of)
        scans: list[tuple[Path, int, SegmentScan]] = []
        for position, path in enumerate(paths):
            index = _index_of(path)
            if path.suffix == LEGACY_SUFFIX:
                self._legacy.add(index)
                records, valid = self._replay_legacy(path, position == len(paths) - 1)
                scans.append((path, index, SegmentScan(records, valid, True)))
            else:
                scans.append((path, index, read_segment(path, index)))
        # Only the last segment holding frames can have been cut by a crash; the ones after it were
        # opened ahead of need and hold none. An open segment before it lost acknowledged data.
        last = max((n for n, (_, _, scan) in enumerate(scans) if scan.end > BLOCK), default=-1)
        for position, (path, index, scan) in enumerate(scans):
            if not scan.sealed:
                if position < last:
                    raise WalCorruption(
                        f"WAL segment {path} is damaged at byte {scan.end} and is not the newest "
                        f"segment: acknowledged appends would be lost; refusing to start (move the "
                        f"file away to accept the loss)"
                    )
                self._seal_after_crash(path, index, scan)
            self._segments[index] = scan.end
            self._disk_bytes += scan.end
            yield from scan.records
        self._index = _index_of(paths[-1]) if paths else 0

    @staticmethod
    def _seal_after_crash(path: Path, index: int, scan: SegmentScan) -> None:
        """Write the end frame where a segment's valid frames end (it was open at the crash)."""
        if scan.end > BLOCK:
            log.warning(
                "WAL segment %s was not closed (the node stopped without closing it): recovered %d "
                "records up to byte %d, discarding what follows (a write never acknowledged, or the "
                "file's earlier use)",
                path,
                len(scan.records),
                scan.end,
            )
        fd = open_direct(path, os.O_RDWR)
        try:
            buffer = AlignedBuffer(BLOCK)
            try:
                if scan.end == BLOCK:  # no header yet, or a stale one: write it first
                    _write_at(fd, 0, header(index), buffer)
                _write_at(fd, scan.end, end_frame(index, scan.end), buffer)
            finally:
                buffer.close()
            os.fdatasync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _replay_legacy(path: Path, newest: bool) -> tuple[list[WalRecord], int]:
        data = path.read_bytes()
        records, valid = scan_legacy(data)
        if valid < len(data):
            if not newest:
                raise WalCorruption(
                    f"WAL segment {path} is damaged at byte {valid} of {len(data)} and is not the newest "
                    f"segment: acknowledged appends would be lost; refusing to start (move the file "
                    f"away to accept the loss)"
                )
            log.warning(
                "WAL segment %s: torn tail at byte %d, discarding %d bytes of unacknowledged writes "
                "(recovered %d records)",
                path,
                valid,
                len(data) - valid,
                len(records),
            )
            with open(path, "r+b") as handle:
                handle.truncate(valid)
                os.fsync(handle.fileno())
        return records, valid

    # Writing -------------------------------------------------------------------------------------

    async def start(self, directory_key: str = WAL_DIR.name) -> None:
        """Make the first segments and start the writer. A directory that cannot hold them (a full
        disk, no permission) is a :class:`StartupError` naming it and ``directory_key``, the key
        that chose it, in one line instead of a traceback."""
        self._loop = asyncio.get_running_loop()
        try:
            await self._loop.run_in_executor(self._executor, self._prepare_first)
            self._switch_to_next()
        except OSError as exc:
            needed = 3 * self.segment_bytes // MiB  # the first segment, the next and a spare
            raise StartupError(
                f"cannot make the WAL's first segments in {self.directory}: {exc.strerror or exc}; "
                f"they take {needed} MiB ({WAL_SEGMENT_BYTES.name} each): free space there or "
                f"change {directory_key}",
                directory_key,
            ) from exc
        self._writer = threading.Thread(target=self._writer_loop, name="s3stream-wal-writer", daemon=True)
        self._writer.start()

    def _prepare_first(self) -> None:
        """On the executor, before the first append: a zero-filled first segment. Blocks that were
        only reserved (``fallocate``) are marked unwritten, and the first write into each costs a
        journal commit at the next fsync; written zeros make each fsync a data-only one. Later
        segments reuse earlier ones, whose blocks have been written."""
        if not self._spares:
            spare = self.directory / segment_name(self._index + 1, SPARE_SUFFIX)
            fd = open_direct(spare, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                write_zeros(fd, self.segment_bytes)
                os.fdatasync(fd)
            finally:
                os.close(fd)
            self._spares.append(spare)
        self._prepare_next(self._index + 1)

    def _prepare_next(self, index: int) -> None:
        """Make segment ``index`` ready ahead of its use (normally on the executor): a spare renamed
        or a new file preallocated, its header written, file and name fsynced. A roll then only
        switches files, so no append waits for a rename, a header or a directory fsync. Returns at
        once if it is ready, and waits if another thread is preparing it."""
        with self._prepare_lock:
            if self._next is not None or index <= self._index:
                return  # ready, or taken already (a roll came before this preparation ran)
            try:
                path = self.directory / segment_name(index)
                with self._segments_lock:
                    spare = self._spares.pop(0) if self._spares else None
                if spare is not None:
                    os.replace(spare, path)
                    fd = open_direct(path, os.O_RDWR)
                else:
                    fd = open_direct(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
                    try:
                        os.posix_fallocate(fd, 0, self.segment_bytes)
                    except OSError as exc:
                        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                            # A full disk: no segment, rather than one whose writes fail halfway
                            # through a frame once they pass the blocks the disk still had.
                            os.close(fd)
                            path.unlink(missing_ok=True)
                            raise
                        # A filesystem without preallocation: the file grows as written.
                try:
                    _write_at(fd, 0, header(index), self._header_buffer)
                    os.fdatasync(fd)
                    fsync_directory(self.directory)
                except BaseException:
                    os.close(fd)
                    raise
                self._next = (index, fd)
                self._prepare_error = None
            except OSError as exc:  # the roll that needs it tries again, and fails the group
                self._prepare_error = exc
                if not self.directory.exists():
                    # A broker that takes a shared WAL over removes its directory once recovered:
                    # this one was paused meanwhile, and its next write meets the fence and says so.
                    log.info("WAL segment %d not prepared: %s is gone (taken over?)", index, self.directory)
                else:
                    log.warning("could not prepare WAL segment %d in %s: %s", index, self.directory, exc)

    def _switch_to_next(self) -> None:
        """Make the next segment current (prepared ahead, or here if it is not ready) and start
        preparing the one after it."""
        index = self._index + 1
        self._prepare_next(index)
        with self._prepare_lock:
            ready, self._next = self._next, None
            if ready is None or ready[0] != index:
                why = self._prepare_error or "see the log"
                raise OSError(f"cannot open WAL segment {index} in {self.directory}: {why}")
            self._fd = ready[1]
            self._index = index
        self._out = BlockWriter(self._fd, BLOCK, self._buffer)
        self._account(BLOCK)
        self._executor.submit(self._prepare_next, index + 1)

    def _account(self, position: int) -> None:
        with self._segments_lock:
            self._disk_bytes += position - self._segments.get(self._index, 0)
            self._segments[self._index] = position

    @property
    def current_segment(self) -> int:
        """Index of the segment being written (``release(current_segment)`` frees all older ones)."""
        return self._index

    @property
    def bytes_used(self) -> int:
        return self._disk_bytes + self.pending_bytes

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise StorageUnavailable(f"the WAL in {self.directory} is not started")
        return self._loop

    def raise_failure(self) -> None:
        """Raise why the WAL failed, if it did: a fenced shared WAL's own error (clients are told
        NOT_LEADER again), else StorageUnavailable."""
        if self.failure is None:
            return
        if (fenced := self.taken_over) is not None:
            raise fenced
        raise StorageUnavailable(f"the WAL in {self.directory} failed earlier: {self.failure}")

    @property
    def taken_over(self) -> StreamError | None:
        """A shared WAL another broker fenced: what it holds is its recoverer's to commit, and
        nothing more of this broker's may be (the error to give for that), else None."""
        failure = self.failure
        return type(failure)(str(failure)) if isinstance(failure, StreamError) else None

    async def check_held(self) -> None:
        """A shared WAL's fence check now, not after the next fsync: a broker woken from a long
        pause must learn that it was deposed before it takes a stream on, not once it writes to
        one. Raises the WAL's failure (see :meth:`raise_failure`)."""
        if self.failure is None and self._after_sync is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._after_sync)
            except StreamError as exc:
                if self.failure is None:
                    self._fail(None, exc)
        self.raise_failure()

    def _current_group(self) -> Group:
        self.raise_failure()
        group = self._group
        if group is None:
            group = self._group = Group(SharedFuture(loop=self._running_loop()))
            self._idle.clear()
            if not self._writing:
                # Hand the group over once this moment's appends have joined it (end of the loop
                # iteration), so appends of the same moment share one fsync.
                self._writing = True
                self._running_loop().call_soon(self._hand_over)
        return group

    def append(
        self,
        stream_id: int,
        base_offset: int,
        record_count: int,
        payload: bytes | memoryview,
        crc: int | None = None,
    ) -> Group:
        """Queue a record (``crc``: the payload's CRC32C, if known); the returned group's future
        resolves once it is fsynced."""
        group = self._group or self._current_group()
        group.records.append((stream_id, base_offset, record_count, payload, crc))
        size = RECORD.size + len(payload)
        group.nbytes += size
        group.payload_bytes += len(payload)
        group.appends += 1
        self.pending_bytes += size
        return group

    def roll(self) -> RollMarker:
        """Start a new segment after everything queued so far; ``done`` gets its index."""
        marker = RollMarker(self._running_loop().create_future())
        self._current_group().records.append(marker)
        return marker

    # The writer: the event loop hands one group at a time to a dedicated thread, which writes and
    # fsyncs it and calls back into the loop. No task, executor future or chained future per group:
    # each thread hop costs a wake-up, and on a busy machine a wake-up can cost a scheduler slice.

    def _hand_over(self) -> None:
        """On the loop: give the current group to the writer thread (which is idle)."""
        group, self._group = self._group, None
        if group is None:
            self._writing = False
            self._idle.set()
            return
        if group.nbytes <= INLINE_BYTES:
            # Small group: write it here. The loop waits about one device write (0.1-0.2 ms),
            # less than the two thread wake-ups a hand-over costs.
            self._written(group, self._write_or_error(group))
            return
        self._queue.put(group)

    def _write_or_error(self, group: Group) -> list[tuple[RollMarker, int]] | BaseException:
        """Write ``group``: the roll markers it passed with their new segments, or what failed."""
        try:
            return self._write_group(group.records)
        except Exception as exc:
            return exc

    def _writer_loop(self) -> None:
        """On the writer thread: write each group handed over; ``None`` stops it."""
        loop = self._running_loop()
        while (group := self._queue.get()) is not None:
            outcome = self._write_or_error(group)
            try:
                loop.call_soon_threadsafe(self._written, group, outcome)
            except RuntimeError:  # the loop closed under us (shutdown without close())
                return

    def _written(self, group: Group, outcome: list[tuple[RollMarker, int]] | BaseException) -> None:
        """On the loop: a group reached the disk (or failed); start the next one, then acknowledge."""
        self.pending_bytes -= group.nbytes
        if isinstance(outcome, BaseException):
            self._fail(group, outcome)
            return
        # Start the next group's write before waking anyone: the disk never waits for the loop.
        self._hand_over()
        for marker, index in outcome:
            if not marker.done.done():
                marker.done.set_result(index)
        group.future.set_result(None)
        self._on_commit(group)

    def _fail(self, group: Group | None, exc: BaseException) -> None:
        # Fail-stop: after a failed write the file's tail is unknown, so no later append may be
        # acknowledged on top of it. A restart replays what is valid.
        if isinstance(exc, StreamError):  # fenced: another broker recovers what it holds
            log.error("WAL write to %s failed; the store stops accepting appends: %s", self.directory, exc)
        else:
            log.error(
                "WAL write to %s failed; the store stops accepting appends until the node is restarted "
                "(a restart replays every acknowledged record): %s", self.directory, exc,
            )  # fmt: skip
        self.failure = exc
        # A fenced shared WAL keeps its error type: clients are told to find the new leader.
        error = exc if isinstance(exc, StreamError) else StorageUnavailable(f"WAL write failed: {exc}")
        pending = self._group
        self._group = None
        for failed in (group, pending):
            if failed is None:
                continue
            if failed is pending:
                self.pending_bytes -= failed.nbytes
            failed.future.set_exception(error)
            failed.future.exception()  # retrieved here; awaiting appends re-raise it
            for item in failed.records:
                if isinstance(item, RollMarker) and not item.done.done():
                    item.done.set_exception(error)
                    item.done.exception()
        self._writing = False
        self._idle.set()

    def _write_group(
        self, items: list[tuple[int, int, int, bytes | memoryview, int | None] | RollMarker]
    ) -> list[tuple[RollMarker, int]]:
        """Runs on the WAL thread: frame, write and fsync one group; roll segments as asked."""
        rolled: list[tuple[RollMarker, int]] = []
        parts: list[bytes | memoryview] = []
        crcs: list[int | None] = []  # each part's CRC32C where known
        pack = RECORD.pack
        for item in items:
            if isinstance(item, RollMarker):
                self._write_frame(parts, crcs)
                parts, crcs = [], []
                self._roll_segment()
                rolled.append((item, self._index))
                continue
            stream_id, base_offset, record_count, payload, crc = item
            parts.append(pack(stream_id, base_offset, record_count, len(payload)))
            parts.append(payload)
            crcs.append(None)
            crcs.append(crc)
        self._write_frame(parts, crcs)
        crashpoints.crash_point("wal.before_fsync")
        self._sync()
        if self._after_sync is not None:
            self._after_sync()
        if self._segments[self._index] >= self.segment_bytes:
            self._roll_segment()
        return rolled

    def _write_frame(self, parts: list[bytes | memoryview], crcs: list[int | None]) -> None:
        if not parts:
            return
        out = self._out
        assert out is not None
        length = sum(len(part) for part in parts)
        if out.position > BLOCK and out.position + 2 * FRAME.size + length > self.segment_bytes:
            self._roll_segment()  # keep within the preallocated file; a lone huge group may grow it
            out = self._out
            assert out is not None
        if length < IN_PLACE_AVERAGE_BYTES * len(parts):
            # Small records: one join, then one CRC call and one copy into the buffer, instead of
            # a Python call of each per record (on the loop, or on a thread holding the GIL).
            parts = [b"".join(parts)]
            crcs = [None]
        position = out.position
        out.write(frame_header(self._index, position, length, parts, crcs))
        for part in parts:
            out.write(part)
        self._account(out.position)

    def _sync(self) -> None:
        assert self._out is not None
        self._out.flush()
        started = time.perf_counter()
        os.fdatasync(self._fd)
        if self._on_fsync is not None:
            self._on_fsync(time.perf_counter() - started)

    def _close_segment(self) -> None:
        """Write the end frame of the current segment, fsync and close it."""
        out = self._out
        assert out is not None
        out.write(end_frame(self._index, out.position))
        self._sync()
        self._out = None
        os.close(self._fd)
        self._fd = -1

    def _roll_segment(self) -> None:
        self._close_segment()
        self._switch_to_next()

    async def release(self, before_index: int) -> None:
        """Free segments older than ``before_index`` (their data is in object storage): keep up to
        ``MAX_SPARES`` of them as spares for later segments, delete the rest."""
        with self._segments_lock:
            doomed = [index for index in self._segments if index < before_index and index != self._index]
        if not doomed:
            return

        def free() -> None:
            for index in doomed:
                legacy = index in self._legacy
                path = self.directory / segment_name(index, LEGACY_SUFFIX if legacy else SEGMENT_SUFFIX)
                with self._segments_lock:
                    keep = not legacy and len(self._spares) < MAX_SPARES
                try:
                    if keep:
                        spare = path.with_suffix(SPARE_SUFFIX)
                        os.replace(path, spare)
                        with self._segments_lock:
                            self._spares.append(spare)
                    else:
                        path.unlink()
                except FileNotFoundError:
                    pass

        await asyncio.get_running_loop().run_in_executor(self._executor, free)
        with self._segments_lock:
            for index in doomed:
                self._disk_bytes -= self._segments.pop(index, 0)
                self._legacy.discard(index)

    async def close(self) -> None:
        if self._writer is not None:
            # Let a queued group reach the disk before stopping the writer.
            if self.failure is None:
                await self._idle.wait()
            self._queue.put(None)
            writer, self._writer = self._writer, None
            await asyncio.get_running_loop().run_in_executor(self._executor, writer.join)
        if self._fd >= 0:
            if self.failure is None:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._close_segment)
            else:
                os.close(self._fd)
                self._fd = -1
        self._executor.shutdown(wait=True)
        if self._next is not None:  # stays on disk, empty: the next start seals it
            os.close(self._next[1])
            self._next = None
        self._buffer.close()
        self._header_buffer.close()
