"""In-memory caches: the LogCache of recent appends and the BlockCache of blocks read from objects.

The LogCache is organised in *blocks*: all appends between two uploads form one block, which is
also the unit uploaded to object storage. A block is evictable only once its upload is committed,
so the LogCache always holds every acknowledged byte not yet in object storage (its size is bounded
by the WAL capacity / batch size) plus as many recent uploaded blocks as fit.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from tabletopic.s3stream.streams import StoredBatch


class Run:
    """One stream's consecutive batches inside one block."""

    __slots__ = ("bases", "batches", "end", "nbytes", "stale", "stream_id")

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id
        # Appended under an ownership of the stream this store gave up (closed, fenced, deleted):
        # never uploaded, even if the stream is opened here again before the block's upload.
        self.stale = False
        self.bases: list[int] = []
        self.batches: list[StoredBatch] = []
        self.end = 0
        self.nbytes = 0

    @property
    def start(self) -> int:
        return self.bases[0]

    def add(self, batch: StoredBatch) -> None:
        self.bases.append(batch.base_offset)
        self.batches.append(batch)
        self.end = batch.next_offset
        self.nbytes += len(batch.payload)

    def index_of(self, offset: int) -> int:
        """Index of the batch holding ``offset`` (the run must hold it)."""
        return max(bisect.bisect_right(self.bases, offset) - 1, 0)


@dataclass(eq=False)
class Block:
    block_id: int
    created: float = field(default_factory=time.monotonic)
    runs: dict[int, Run] = field(default_factory=dict)
    nbytes: int = 0
    sealed: bool = False
    committed: bool = False
    # Resolved when the block is in object storage (object WAL: that is the acknowledgement).
    uploaded: asyncio.Future[None] | None = None
    # Local WAL: the segment rolled at sealing; older segments are free once this block is uploaded.
    wal_marker: object | None = None
    # Local WAL: the future of the last WAL group holding one of its appends (groups settle in
    # order), which the upload awaits before it commits.
    written: asyncio.Future[None] | None = None
    generation: int = 0
    appends: int = 0
    released: bool = False  # its bytes no longer count towards the upload backlog


class LogCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: deque[Block] = deque()
        self.nbytes = 0
        self._runs: dict[int, list[Run]] = {}
        self._next_block_id = 1
        self.current = self._new_block()

    def _new_block(self) -> Block:
        block = Block(self._next_block_id)
        self._next_block_id += 1
        self.blocks.append(block)
        return block

    def add(self, stream_id: int, batch: StoredBatch) -> Block:
        block = self.current
        run = block.runs.get(stream_id)
        if run is None or run.stale:
            run = block.runs[stream_id] = Run(stream_id)
            self._runs.setdefault(stream_id, []).append(run)
        run.add(batch)
        size = len(batch.payload)
        block.nbytes += size
        self.nbytes += size
        return block

    def seal(self) -> Block:
        """Close the current block (it will be uploaded) and open a new one."""
        block = self.current
        block.sealed = True
        self.current = self._new_block()
        return block

    def lookup(self, stream_id: int, offset: int) -> Run | None:
        """The cached run holding ``offset`` of the stream, if any."""
        runs = self._runs.get(stream_id)
        if not runs:
            return None
        index = bisect.bisect_right(runs, offset, key=lambda run: run.start) - 1
        if index < 0:
            return None
        run = runs[index]
        return run if offset < run.end else None

    def runs_after(self, stream_id: int, run: Run) -> Run | None:
        runs = self._runs.get(stream_id, [])
        for index in range(len(runs) - 1, -1, -1):
            if runs[index] is run:
                return runs[index + 1] if index + 1 < len(runs) else None
        return None

    def earliest(self, stream_id: int) -> int | None:
        runs = self._runs.get(stream_id)
        return runs[0].start if runs else None

    def evict(self) -> None:
        """Drop the oldest uploaded blocks while over capacity."""
        while self.nbytes > self.capacity and self.blocks and self.blocks[0].committed:
            self._drop(self.blocks.popleft())

    def discard(self, block: Block) -> None:
        """Forget a block whose appends failed (object WAL)."""
        try:
            self.blocks.remove(block)
        except ValueError:
            return
        self._drop(block)
        if block is self.current:
            self.current = self._new_block()

    def _drop(self, block: Block) -> None:
        self.nbytes -= block.nbytes
        for stream_id, run in block.runs.items():
            runs = self._runs.get(stream_id)
            if runs is None:
                continue
            try:
                runs.remove(run)
            except ValueError:
                pass
            if not runs:
                del self._runs[stream_id]

    def replace_batches(self, stream_id: int, batches: list[StoredBatch]) -> None:
        """A rewrite (log compaction) replaced these batches in object storage: serve the new
        versions from the cache too (same offsets; batches not cached are ignored)."""
        by_base = {b.base_offset: b for b in batches}
        for run in self._runs.get(stream_id, []):
            for index, old in enumerate(run.batches):
                new = by_base.get(old.base_offset)
                if new is not None and new.record_count == old.record_count:
                    run.batches[index] = new

    def forget_stream(self, stream_id: int) -> None:
        for run in self._runs.pop(stream_id, []):
            run.stale = True


class BlockCache:
    """LRU of decoded object blocks, keyed by ``(object key, block position)``, bounded in bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.nbytes = 0
        self._blocks: OrderedDict[tuple[str, int], tuple[list[StoredBatch], int]] = OrderedDict()

    def get(self, key: str, position: int) -> list[StoredBatch] | None:
        entry = self._blocks.get((key, position))
        if entry is None:
            return None
        self._blocks.move_to_end((key, position))
        return entry[0]

    def __contains__(self, item: tuple[str, int]) -> bool:
        return item in self._blocks

    def put(self, key: str, position: int, batches: list[StoredBatch], size: int) -> None:
        if (key, position) in self._blocks:
            return
        self._blocks[(key, position)] = (batches, size)
        self.nbytes += size
        while self.nbytes > self.capacity and len(self._blocks) > 1:
            _, (_, dropped) = self._blocks.popitem(last=False)
            self.nbytes -= dropped

    def clear(self) -> None:
        self._blocks.clear()
        self.nbytes = 0

    def drop_object(self, key: str) -> None:
        for cached in [k for k in self._blocks if k[0] == key]:
            self.nbytes -= self._blocks.pop(cached)[1]
