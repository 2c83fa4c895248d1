"""The local write-ahead log: segment files on local disk written with group commit.

Every append joins the *current group*; at the end of the event-loop iteration the group goes to
the WAL's own writer thread, which writes it with ``writev``, covers it with one ``fdatasync`` and
calls back into the loop to resolve the group's single future (no task or executor future per
group). Appends arriving meanwhile form the next group, so the fsync rate adapts to the load and no
append gets its own thread, task or syscall.

Framing: each group commit is written as ONE frame, ``>II`` (body length, CRC32C of the body),
whose body is the group's records, each ``>qqII`` (stream id, base offset, record count, payload
length) + payload. A group is acknowledged as a whole after its fsync, so a frame is exactly the
unit that is either fully acknowledged or not at all. Small records are joined into one buffer and
checksummed with one C call (far cheaper than a CRC call per record on the WAL thread, which competes
with the event loop for the GIL); large ones are checksummed and written where they lie, since a copy
of every byte into fresh memory costs more than a few CRC calls. Replay stops at the first frame
that is short or fails its CRC: in the newest segment that is the torn tail of writes never
acknowledged (truncated away with a log line); in an older segment it means acknowledged data is
damaged, and the WAL refuses to open.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from tabletopic import crashpoints
from tabletopic.s3stream.objects import IN_PLACE_AVERAGE_BYTES
from tabletopic.s3stream.streams import StorageUnavailable, StreamError

log = logging.getLogger(__name__)

FRAME = struct.Struct(">II")
RECORD = struct.Struct(">qqII")
SUFFIX = ".wal"
IOV_MAX = 1024


class WalCorruption(StreamError):
    """Acknowledged data in the WAL is damaged; the store refuses to start rather than lose it."""


class SharedFuture(asyncio.Future[None]):
    """A future awaited by many appends at once (a group or a batch object). It refuses
    cancellation: a cancelled caller then gets CancelledError when the future completes, instead of
    cancelling everyone else's acknowledgement. Cheaper than ``asyncio.shield`` per append."""

    def cancel(self, msg: object = None) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class WalRecord:
    stream_id: int
    base_offset: int
    record_count: int
    payload: bytes | memoryview


@dataclass
class Group:
    """Appends covered by one fsync. ``ends`` maps stream id -> end offset after the group."""

    future: asyncio.Future[None]
    # (stream id, base offset, record count, payload) tuples: cheaper than objects on the hot path.
    records: list[tuple[int, int, int, bytes | memoryview] | RollMarker] = field(default_factory=list)
    ends: dict[int, int] = field(default_factory=dict)
    nbytes: int = 0
    payload_bytes: int = 0
    appends: int = 0


@dataclass
class RollMarker:
    """Everything queued before it goes to the old segment, everything after to a new one."""

    done: asyncio.Future[int]


def write_all(fd: int, buffers: list[bytes | memoryview]) -> None:
    """``writev`` every buffer (at most IOV_MAX at a time), finishing short writes."""
    for start in range(0, len(buffers), IOV_MAX):
        chunk = buffers[start : start + IOV_MAX]
        total = sum(len(piece) for piece in chunk)
        written = os.writev(fd, chunk)
        if written != total:  # a short write: finish the rest with plain writes
            rest = b"".join(chunk)[written:]
            while rest:
                rest = rest[os.write(fd, rest) :]


def segment_name(index: int) -> str:
    return f"{index:020d}{SUFFIX}"


def scan_frames(data: bytes) -> tuple[list[WalRecord], int]:
    """Parse frames until the end or the first bad one: ``(records, valid byte length)``."""
    view = memoryview(data)
    records: list[WalRecord] = []
    position = 0
    end = len(data)
    while end - position >= FRAME.size:
        length, crc = FRAME.unpack_from(view, position)
        body_start = position + FRAME.size
        if body_start + length > end:
            break
        body = view[body_start : body_start + length]
        if crc32c.crc32c(body) != crc:
            break
        parsed = _parse_records(body)
        if parsed is None:
            break
        records.extend(parsed)
        position = body_start + length
    return records, position


def _parse_records(body: memoryview) -> list[WalRecord] | None:
    records = []
    position = 0
    while position < len(body):
        if len(body) - position < RECORD.size:
            return None
        stream_id, base, count, length = RECORD.unpack_from(body, position)
        position += RECORD.size
        if position + length > len(body):
            return None
        records.append(WalRecord(stream_id, base, count, body[position : position + length]))
        position += length
    return records


class LocalWal:
    def __init__(
        self,
        directory: Path,
        segment_bytes: int,
        on_commit: Callable[[Group], None],
        on_fsync: Callable[[float], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self._on_commit = on_commit
        self._on_fsync = on_fsync
        # Segment deletions (release) run here, off the loop and off the writer thread.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3stream-wal")
        self._segments: dict[int, int] = {}  # index -> size on disk; shared with the WAL thread
        self._segments_lock = threading.Lock()
        self._disk_bytes = 0
        self._fd = -1
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
        """Whether ``directory`` has a non-empty WAL segment (cheap; no replay)."""
        directory = Path(directory)
        return directory.is_dir() and any(p.stat().st_size for p in directory.glob(f"*{SUFFIX}"))

    def remove_segments(self) -> None:
        """Delete every segment (after close, once everything is in object storage)."""
        for path in self.directory.glob(f"*{SUFFIX}"):
            path.unlink(missing_ok=True)

    # Recovery ------------------------------------------------------------------------------------

    def replay(self) -> Iterator[WalRecord]:
        """Yield every valid record of every segment in write order (blocking; call before start).
        Truncates a torn tail of the newest segment; raises WalCorruption for damage elsewhere."""
        indexes = sorted(int(p.name[: -len(SUFFIX)]) for p in self.directory.glob(f"*{SUFFIX}"))
        for position, index in enumerate(indexes):
            path = self.directory / segment_name(index)
            data = path.read_bytes()
            records, valid = scan_frames(data)
            if valid < len(data):
                if position != len(indexes) - 1:
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
            self._segments[index] = valid
            self._disk_bytes += valid
            yield from records
        self._index = indexes[-1] if indexes else 0

    # Writing -------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._open_segment(self._index + 1)
        self._writer = threading.Thread(target=self._writer_loop, name="s3stream-wal-writer", daemon=True)
        self._writer.start()

    def _open_segment(self, index: int) -> None:
        path = self.directory / segment_name(index)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._index = index
        size = os.fstat(self._fd).st_size
        with self._segments_lock:
            self._disk_bytes += size - self._segments.get(index, 0)
            self._segments[index] = size
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

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

    def _current_group(self) -> Group:
        if self.failure is not None:
            raise StorageUnavailable(f"the WAL in {self.directory} failed earlier: {self.failure}")
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
        self, stream_id: int, base_offset: int, record_count: int, payload: bytes | memoryview
    ) -> Group:
        """Queue a record; the returned group's future resolves once it is fsynced."""
        group = self._group or self._current_group()
        group.records.append((stream_id, base_offset, record_count, payload))
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
        self._queue.put(group)

    def _writer_loop(self) -> None:
        """On the writer thread: write each group handed over; ``None`` stops it."""
        loop = self._running_loop()
        while (group := self._queue.get()) is not None:
            try:
                rolled = self._write_group(group.records)
            except Exception as exc:
                outcome: list[tuple[RollMarker, int]] | BaseException = exc
            else:
                outcome = rolled
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

    def _fail(self, group: Group, exc: BaseException) -> None:
        # Fail-stop: after a failed write the file's tail is unknown, so no later append may be
        # acknowledged on top of it. A restart replays what is valid.
        log.error("WAL write to %s failed; the store stops accepting appends: %s", self.directory, exc)
        self.failure = exc
        error = StorageUnavailable(f"WAL write failed: {exc}")
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
        self, items: list[tuple[int, int, int, bytes | memoryview] | RollMarker]
    ) -> list[tuple[RollMarker, int]]:
        """Runs on the WAL thread: frame, write and fsync one group; roll segments as asked."""
        rolled: list[tuple[RollMarker, int]] = []
        parts: list[bytes | memoryview] = []
        pack = RECORD.pack
        for item in items:
            if isinstance(item, RollMarker):
                self._write_frame(parts)
                parts = []
                self._sync()
                self._roll_segment()
                rolled.append((item, self._index))
                continue
            stream_id, base_offset, record_count, payload = item
            parts.append(pack(stream_id, base_offset, record_count, len(payload)))
            parts.append(payload)
        self._write_frame(parts)
        crashpoints.crash_point("wal.before_fsync")
        self._sync()
        if self._segments[self._index] >= self.segment_bytes:
            self._roll_segment()
        return rolled

    def _write_frame(self, parts: list[bytes | memoryview]) -> None:
        if not parts:
            return
        length = sum(len(part) for part in parts)
        if length >= IN_PLACE_AVERAGE_BYTES * len(parts):
            # Large payloads: checksum them where they lie and hand them to writev as they are; a
            # copy of every byte (into fresh memory) costs more than one CRC call per part.
            crc = 0
            for part in parts:
                crc = crc32c.crc32c(part, crc)
            buffers = [FRAME.pack(length, crc), *parts]
        else:
            body = b"".join(parts)
            buffers = [FRAME.pack(length, crc32c.crc32c(body)), body]
        write_all(self._fd, buffers)
        nbytes = FRAME.size + length
        with self._segments_lock:
            self._segments[self._index] += nbytes
            self._disk_bytes += nbytes

    def _sync(self) -> None:
        started = time.perf_counter()
        os.fdatasync(self._fd)
        if self._on_fsync is not None:
            self._on_fsync(time.perf_counter() - started)

    def _roll_segment(self) -> None:
        os.close(self._fd)
        self._open_segment(self._index + 1)

    async def release(self, before_index: int) -> None:
        """Delete segments older than ``before_index`` (their data is in object storage)."""
        with self._segments_lock:
            doomed = [index for index in self._segments if index < before_index and index != self._index]
        if not doomed:
            return

        def remove() -> None:
            for index in doomed:
                try:
                    (self.directory / segment_name(index)).unlink()
                except FileNotFoundError:
                    pass

        await asyncio.get_running_loop().run_in_executor(self._executor, remove)
        with self._segments_lock:
            for index in doomed:
                self._disk_bytes -= self._segments.pop(index, 0)

    async def close(self) -> None:
        if self._writer is not None:
            # Let a queued group reach the disk before stopping the writer.
            if self.failure is None:
                await self._idle.wait()
            self._queue.put(None)
            writer, self._writer = self._writer, None
            await asyncio.get_running_loop().run_in_executor(self._executor, writer.join)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._executor.shutdown(wait=True)
