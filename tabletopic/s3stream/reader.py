"""Reads from objects: the per-object block index, the BlockCache, range GETs with readahead,
background prefetch for sequential readers, and deduplication of concurrent reads of one block or
one object's index."""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

from tabletopic.s3stream.cache import BlockCache
from tabletopic.s3stream.db import RangeRow
from tabletopic.s3stream.metrics import StoreMetrics
from tabletopic.s3stream.objects import BlockEntry, read_index, split_batches, verify_block
from tabletopic.s3stream.objectstore import AsyncObjectStore
from tabletopic.s3stream.streams import StoredBatch, StreamError

log = logging.getLogger(__name__)

INDEX_CACHE_ENTRIES = 4096
MAX_PREFETCHES = 8

Key = TypeVar("Key")
Value = TypeVar("Value")
# An object's index: its blocks, by stream.
BlocksByStream = dict[int, list[BlockEntry]]


class SingleFlight(Generic[Key, Value]):
    """Concurrent loads of one key share the first caller's GET, its result or its error. A
    broker that gains many partitions at once reads their tails together, and one object holds
    many of them: without this, every reader that came before the first finished would GET and
    parse the same index or block again."""

    def __init__(self) -> None:
        self._running: dict[Key, asyncio.Future[Value]] = {}

    def __contains__(self, key: Key) -> bool:
        return key in self._running

    async def load(self, key: Key, work: Callable[[], Awaitable[Value]]) -> Value:
        running = self._running.get(key)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future[Value] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            value = await work()
            future.set_result(value)
            return value
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: an error no other caller waited for is not logged
            raise
        finally:
            del self._running[key]


class ObjectReader:
    def __init__(
        self, objects: AsyncObjectStore, block_cache: BlockCache, metrics: StoreMetrics, readahead_bytes: int
    ) -> None:
        self.objects = objects
        self.block_cache = block_cache
        self.metrics = metrics
        self.readahead_bytes = readahead_bytes
        self._index_cache: OrderedDict[str, BlocksByStream] = OrderedDict()
        self._index_reads: SingleFlight[str, BlocksByStream] = SingleFlight()
        self._block_reads: SingleFlight[tuple[str, int], list[StoredBatch]] = SingleFlight()
        self._prefetches: set[asyncio.Future[None]] = set()
        self._crossing: set[int] = set()  # streams with a prefetch into their next range under way

    async def read(
        self, stream_id: int, ranges: list[RangeRow], range_starts: list[int], offset: int, want: int
    ) -> list[StoredBatch]:
        """The batches of the block holding ``offset`` (read with readahead on a miss)."""
        index = bisect.bisect_right(range_starts, offset) - 1
        if index < 0 or not (ranges[index].start_offset <= offset < ranges[index].end_offset):
            raise StreamError(f"offset {offset} of stream {stream_id} is neither cached nor in any object")
        rng = ranges[index]
        blocks = await self.blocks_of(rng)
        first = next((i for i, b in enumerate(blocks) if b.start_offset <= offset < b.end_offset), None)
        if first is None:
            raise StreamError(
                f"object {rng.object_key} has no block for offset {offset} of stream {stream_id}"
            )
        cached = self.block_cache.get(rng.object_key, blocks[first].position)
        self.metrics.cache_read("block", cached is not None)
        if cached is not None:
            self._maybe_prefetch(stream_id, ranges, index, blocks, first)
            return cached
        batches = await self._load_blocks(rng, blocks, first, max(want, self.readahead_bytes))
        self._maybe_prefetch(stream_id, ranges, index, blocks, first)
        return batches

    async def _load_blocks(
        self, rng: RangeRow, blocks: list[BlockEntry], first: int, want: int
    ) -> list[StoredBatch]:
        """Read ``blocks[first]`` (and readahead) unless the same read is already under way."""
        return await self._block_reads.load(
            (rng.object_key, blocks[first].position), lambda: self._read_blocks(rng, blocks, first, want)
        )

    def _maybe_prefetch(
        self, stream_id: int, ranges: list[RangeRow], range_index: int, blocks: list[BlockEntry], current: int
    ) -> None:
        """Sequential readers: once less than half a readahead window is cached ahead of the block
        being read, fetch the next window in the background so the reader never waits on a GET.
        At the end of a range the window continues in the stream's next object."""
        window = self.readahead_bytes
        if window <= 0 or len(self._prefetches) >= MAX_PREFETCHES:
            return
        rng = ranges[range_index]
        ahead = 0
        for index in range(current + 1, len(blocks)):
            if ahead >= window // 2:
                return
            key = (rng.object_key, blocks[index].position)
            if key not in self.block_cache:
                if key not in self._block_reads:
                    self._spawn(self._prefetch(rng, blocks, index, window))
                return
            ahead += blocks[index].size
        if range_index + 1 < len(ranges) and stream_id not in self._crossing:
            self._crossing.add(stream_id)
            task = self._spawn(self._prefetch_next_ranges(ranges[range_index + 1 :], window))
            task.add_done_callback(lambda _: self._crossing.discard(stream_id))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        task = asyncio.ensure_future(work)
        self._prefetches.add(task)
        task.add_done_callback(self._prefetches.discard)
        return task

    async def _prefetch_next_ranges(self, following: list[RangeRow], window: int) -> None:
        """Load the first ``window`` bytes of the stream's following ranges, concurrently (before
        compaction a stream is spread over many small ranges, one GET each)."""
        chosen: list[RangeRow] = []
        total = 0
        for rng in following:
            if total >= window:
                break
            chosen.append(rng)
            total += rng.size
        await asyncio.gather(*(self._prefetch_range_start(rng, window) for rng in chosen))

    async def _prefetch_range_start(self, rng: RangeRow, window: int) -> None:
        try:
            blocks = await self.blocks_of(rng)
            if blocks and (rng.object_key, blocks[0].position) not in self.block_cache:
                await self._load_blocks(rng, blocks, 0, window)
        except Exception as exc:  # the reader retries on demand and reports real errors
            log.debug("prefetch of %s failed: %s", rng.object_key, exc)

    async def _prefetch(self, rng: RangeRow, blocks: list[BlockEntry], first: int, want: int) -> None:
        try:
            await self._load_blocks(rng, blocks, first, want)
        except Exception as exc:  # the reader retries on demand and reports real errors
            log.debug("prefetch of %s failed: %s", rng.object_key, exc)

    async def blocks_of(self, rng: RangeRow) -> list[BlockEntry]:
        """The blocks of ``rng`` from the object's index (read once, then cached per stream)."""
        by_stream = self._index_cache.get(rng.object_key)
        if by_stream is None:
            by_stream = await self._index_reads.load(rng.object_key, lambda: self._read_index(rng))
        else:
            self._index_cache.move_to_end(rng.object_key)
        end = rng.position + rng.size
        return [b for b in by_stream.get(rng.stream_id, ()) if rng.position <= b.position < end]

    async def _read_index(self, rng: RangeRow) -> BlocksByStream:
        entries = await read_index(self.objects.get_range, rng.object_key, rng.object_size)
        by_stream: BlocksByStream = {}
        for entry in entries:
            by_stream.setdefault(entry.stream_id, []).append(entry)
        self._index_cache[rng.object_key] = by_stream
        while len(self._index_cache) > INDEX_CACHE_ENTRIES:
            self._index_cache.popitem(last=False)
        return by_stream

    async def _read_blocks(
        self, rng: RangeRow, blocks: list[BlockEntry], first: int, want: int
    ) -> list[StoredBatch]:
        """One range GET for ``blocks[first]`` and as many following blocks as ``want`` bytes allow
        (readahead); every block read is verified and cached."""
        last = first
        total = blocks[first].size
        while (
            last + 1 < len(blocks)
            and total < want
            and (rng.object_key, blocks[last + 1].position) not in self.block_cache
        ):
            last += 1
            total += blocks[last].size
        start = blocks[first].position
        data = await self.objects.get_range(rng.object_key, start, blocks[last].position + blocks[last].size)
        self.metrics.object_reads.inc(len(data))
        view = memoryview(data)
        result: list[StoredBatch] = []
        for entry in blocks[first : last + 1]:
            piece = view[entry.position - start : entry.position - start + entry.size]
            verify_block(piece, entry, rng.object_key)
            batches = split_batches(piece)
            self.block_cache.put(rng.object_key, entry.position, batches, entry.size)
            if entry is blocks[first]:
                result = batches
        return result

    @property
    def prefetching(self) -> int:
        """Background prefetches under way (a test waits for them instead of guessing a delay)."""
        return len(self._prefetches)

    def forget_object(self, key: str) -> None:
        self._index_cache.pop(key, None)
        self.block_cache.drop_object(key)

    async def close(self) -> None:
        for task in list(self._prefetches):
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
