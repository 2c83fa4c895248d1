"""The state the engine's three parts share: the store (append / fetch / recovery), the
:class:`~tabletopic.s3stream.upload.Uploader` and the :class:`~tabletopic.s3stream.compaction.Compactor`.

:class:`~tabletopic.s3stream.store.S3StreamStore` creates one :class:`StoreState` and hands it to the
other two, so what they share is written down in one place instead of being reached for through
each other's attributes. Everything here runs on the store's event loop; only ``db`` leaves it (for
a worker thread) and only for the blocking metadata-DB calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tabletopic.s3stream.cache import BlockCache, LogCache
from tabletopic.s3stream.config import StoreSettings, WalMode
from tabletopic.s3stream.db import Fence, RangeRow, StreamMetadata
from tabletopic.s3stream.epochs import NO_EPOCHS, EpochHistory
from tabletopic.s3stream.metrics import StoreMetrics
from tabletopic.s3stream.objects import StreamRange
from tabletopic.s3stream.objectstore import AsyncObjectStore
from tabletopic.s3stream.reader import ObjectReader
from tabletopic.s3stream.semantics import DataWaiters
from tabletopic.s3stream.streams import StreamNotFound
from tabletopic.s3stream.wal import LocalWal

T = TypeVar("T")


class StreamState:
    """One open stream in memory. Offsets: ``next_end`` (assigned) >= ``confirmed_end``
    (acknowledged; readers see up to here) >= ``committed_end`` (in object storage, recorded in the
    metadata DB). ``ranges`` index the stream's committed objects by start offset."""

    __slots__ = (
        "closing",
        "committed_end",
        "confirmed_end",
        "epochs",
        "fence",
        "next_end",
        "range_starts",
        "ranges",
        "start",
        "waiters",
    )

    def __init__(
        self, start: int, end: int, fence: Fence | None = None, epochs: EpochHistory = NO_EPOCHS
    ) -> None:
        # (epoch, owner) this store opened the stream with (cluster mode); None on one node.
        self.fence = fence
        self.epochs = epochs  # every epoch the stream was opened with, and where each began
        self.start = start
        self.committed_end = end
        self.confirmed_end = end
        self.next_end = end
        self.ranges: list[RangeRow] = []
        self.range_starts: list[int] = []
        self.waiters = DataWaiters()
        # Being closed here (handed to another broker): nothing more is appended or acknowledged,
        # so the close's upload holds every acknowledged append (see S3StreamStore.close_streams).
        self.closing = False

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

    def confirm(self, end: int) -> None:
        """Appends up to ``end`` are acknowledged: readers may see them, long polls wake up."""
        if end <= self.confirmed_end:
            return
        self.confirmed_end = end
        self.waiters.advance(end)


def _db_executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="s3stream-db")


@dataclass(eq=False)
class StoreState:
    """What the store, the uploader and the compactor share.

    ``commit_lock`` is held while the metadata DB and the in-memory range index change together
    (an upload or compaction commit) and while compaction snapshots the DB, so compaction never
    sees an object the index lacks. ``inflight_objects`` are objects reserved by this process and
    not yet committed or abandoned: garbage collection must not take them. The upload backlog
    (``wal`` bytes in local mode, ``pending_upload_bytes`` in object mode) bounds appends;
    ``space_freed`` wakes appends waiting for it. ``generation`` tags object-WAL batches: a failed
    upload bumps it, and a batch of an older generation must not commit.
    """

    settings: StoreSettings
    meta: StreamMetadata
    objects: AsyncObjectStore
    metrics: StoreMetrics
    log_cache: LogCache
    block_cache: BlockCache
    reader: ObjectReader
    streams: dict[int, StreamState] = field(default_factory=dict)
    commit_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    inflight_objects: set[int] = field(default_factory=set)
    wal: LocalWal | None = None
    space_freed: asyncio.Event = field(default_factory=asyncio.Event)
    pending_upload_bytes: int = 0
    generation: int = 0
    db_executor: ThreadPoolExecutor = field(default_factory=_db_executor)

    @property
    def local_wal(self) -> bool:
        """Whether the configured mode acknowledges after a WAL fsync (local or shared; the ``wal``
        may still be open in object mode while a leftover local WAL is recovered)."""
        return self.settings.wal_mode is not WalMode.OBJECT

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking metadata-DB call on the DB threads."""
        return await asyncio.get_running_loop().run_in_executor(self.db_executor, fn, *args)

    def stream(self, stream_id: int) -> StreamState:
        state = self.streams.get(stream_id)
        if state is None:
            raise StreamNotFound(f"stream {stream_id} does not exist")
        return state

    def fences(self, stream_ids: Iterable[int]) -> dict[int, Fence]:
        """The fences of those streams opened with one (cluster mode), for a commit to check."""
        result = {}
        for sid in stream_ids:
            state = self.streams.get(sid)
            if state is not None and state.fence is not None:
                result[sid] = state.fence
        return result

    def confirm(self, stream_id: int, end: int) -> None:
        state = self.streams.get(stream_id)
        if state is not None:
            state.confirm(end)

    def backlog_bytes(self) -> int:
        """Bytes waiting to be made durable in object storage: the WAL's size (local mode) or the
        batch objects not yet committed (object mode)."""
        if self.wal is not None:
            return self.wal.bytes_used
        return self.pending_upload_bytes

    def add_ranges(self, object_id: int, key: str, size: int, ranges: Iterable[StreamRange]) -> None:
        """Index a newly committed object's ranges (call with ``commit_lock`` held)."""
        for rng in ranges:
            state = self.streams.get(rng.stream_id)
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

    def replace_ranges(self, replaced: set[int], new_ranges: list[RangeRow]) -> None:
        """Swap the in-memory index after a compaction commit (call with ``commit_lock`` held, so
        the DB and the index change at the same transaction boundary)."""
        touched: dict[int, list[RangeRow]] = {}
        for row in new_ranges:
            touched.setdefault(row.stream_id, []).append(row)
        for sid, state in self.streams.items():
            if sid in touched or any(r.object_id in replaced for r in state.ranges):
                state.set_ranges(
                    [r for r in state.ranges if r.object_id not in replaced] + touched.get(sid, [])
                )
