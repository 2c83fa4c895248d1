"""Background compaction and garbage collection, rate-limited.

One pass:

1. *Unreferenced*: committed objects whose every range belongs to a deleted stream or lies below a
   stream's start offset are marked for deletion.
2. *Stream-set merge*: small stream-set objects are rewritten together; inside the merged data a
   stream with at least ``split_bytes`` gets its own stream object (the split).
3. *Stream-object merge*: small stream objects of one stream with adjacent offsets are joined.
4. *GC*: marked objects past the grace period, and ``prepared`` orphans of interrupted uploads or
   compactions, are deleted from the store and then forgotten.

Both merges are size-tiered (:func:`worth_merging`): an object joins a merge only if the others
together hold at least as much live data. Without that, the object a pass made was read and written
again by every later pass until it outgrew ``small_object_bytes``, however little had arrived since
(at 5 KiB/s, up to 32 MiB a minute to add 300 KiB); with it, a byte is rewritten about
log2(small_object_bytes / upload size) times, and about as many small objects stand at once, each
at least twice the size of the next.

Safety: new objects are reserved (``prepared``), written, and then swapped for the old ones in ONE
metadata transaction that also refuses if any old object changed meanwhile. Killed before that
transaction, the old objects stay authoritative and the new ones are orphans for GC; killed after
it, the new ones are authoritative and the old ones are garbage. No offset is lost or duplicated.

The :class:`Compactor` works on the :class:`~tabletopic.s3stream.state.StoreState` the store hands
it: the streams' start offsets say what is still live, and the in-memory range index is swapped
under the same ``commit_lock`` as the metadata transaction.

In cluster mode (``copy_unheld``) a node holds only its own streams: a rewrite for log compaction
copies the data of streams other nodes hold as it is (their readers find the new object by
reloading their ranges once the old one is gone), and commits only while the stream it rewrites is
still held with this node's epoch, checked in the swap's own transaction. Passes (merges, marking,
GC) run on one node only (``active``: the cluster's controller), which reads every stream's start
offset from the metadata database instead of its memory to tell live data from garbage; two nodes
briefly both active are safe, as the swap refuses objects that changed meanwhile.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from tabletopic import crashpoints
from tabletopic.s3stream.db import (
    CommitConflict,
    Fence,
    Layouts,
    NewObject,
    ObjectKind,
    ObjectRow,
    RangeRow,
)
from tabletopic.s3stream.objects import (
    BlockEntry,
    StoredBlock,
    StoredPiece,
    StreamRange,
    build_object,
    parse_footer,
    parse_index,
    split_batches,
    stored_bytes,
    verify_block,
)
from tabletopic.s3stream.semantics import check_rewrite
from tabletopic.s3stream.state import StoreState
from tabletopic.s3stream.streams import BatchTransform, StoredBatch, StreamError, StreamFenced
from tabletopic.tasks import run_every

log = logging.getLogger(__name__)

MERGE_RATIO = 1.0
"""An object joins a merge only while it holds at most this many times the live bytes of the rest of
the merge together. At 1, the carry of a binary counter: two objects of about one size merge, and
the result waits for as much again."""


@dataclass
class CompactionReport:
    unreferenced: int = 0
    merged_stream_set: int = 0
    merged_stream_objects: int = 0
    written: int = 0
    deleted: int = 0


class RateLimiter:
    """A token bucket in bytes per second (burst: one second's worth)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._tokens = float(rate)
        self._stamp = time.monotonic()

    async def take(self, amount: int) -> None:
        now = time.monotonic()
        self._tokens = min(self.rate, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self._tokens -= amount
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)


class Compactor:
    """One pass at a time (:meth:`run_once`), or every ``compaction_interval_ms`` (:meth:`run_forever`)."""

    def __init__(self, state: StoreState) -> None:
        self.state = state
        self.settings = state.settings
        self.meta = state.meta
        self.limiter = RateLimiter(self.settings.compaction_rate)
        self._lock = asyncio.Lock()
        # Cluster mode: data of streams this node does not hold is copied, never dropped.
        self.copy_unheld = False
        # Whether this node runs the background passes (cluster mode: while it is the controller).
        self.active: Callable[[], bool] = lambda: True
        # Called with the streams whose data moved to new objects (cluster mode: the nodes holding
        # them reload their ranges, which still name the replaced objects).
        self.on_swapped: Callable[[set[int]], None] | None = None
        # :data:`MERGE_RATIO`; infinite merges every small object every pass (the bench's baseline).
        self.merge_ratio = MERGE_RATIO

    async def run_forever(self) -> None:
        interval = self.settings.compaction_interval_ms / 1000

        async def pass_when_active() -> None:
            if self.active():
                await self.run_once()

        await run_every(lambda: interval, pass_when_active, "compaction", log)

    async def run_once(self) -> CompactionReport:
        async with self._lock:
            report = CompactionReport()
            state = self.state
            db = state.db
            async with state.commit_lock:
                objects = await db(self.meta.committed_objects)
                ranges = await db(self.meta.ranges_of, [o.object_id for o in objects])
            # Cluster mode: every stream's start as recorded (read after the ranges, so a stream
            # with ranges read is listed unless it was deleted since).
            starts = None
            if self.copy_unheld:
                starts = {sid: start for sid, (start, _) in (await db(self.meta.load_streams)).items()}
            dead = [
                o.object_id for o in objects if not any(self._live(r, starts) for r in ranges[o.object_id])
            ]
            if dead:
                async with state.commit_lock:
                    report.unreferenced = await db(self.meta.mark_unreferenced, dead)
                    state.replace_ranges(set(dead), [])
            alive = [o for o in objects if o.object_id not in set(dead)]
            groups, stream_groups = self._merges(alive, ranges, starts)
            backlog = sum(len(g) for g in groups + stream_groups)
            state.metrics.compaction_backlog.set(backlog)
            for group in groups:
                if await self._compact(group, ranges, starts=starts):
                    report.merged_stream_set += len(group)
                backlog -= len(group)
                state.metrics.compaction_backlog.set(backlog)
            for group in stream_groups:
                if await self._compact(group, ranges, starts=starts):
                    report.merged_stream_objects += len(group)
                backlog -= len(group)
                state.metrics.compaction_backlog.set(backlog)
            report.deleted = await self._collect_garbage()
            return report

    def _merges(
        self, alive: list[ObjectRow], ranges: dict[int, list[StreamRange]], starts: Mapping[int, int] | None
    ) -> tuple[list[list[ObjectRow]], list[list[ObjectRow]]]:
        """The stream-set merges and the stream-object merges this pass makes, size-tiered by the
        bytes each object still holds live."""
        live = {o.object_id: sum(r.size for r in ranges[o.object_id] if self._live(r, starts)) for o in alive}
        small = self.settings.small_object_bytes
        stream_sets = [o for o in alive if o.kind == ObjectKind.STREAM_SET and o.size < small]
        heaviest_first = sorted(stream_sets, key=lambda o: live[o.object_id], reverse=True)
        chosen = {o.object_id for o in worth_merging(heaviest_first, live, self.merge_ratio)}
        stream_objects = [o for o in alive if o.kind == ObjectKind.STREAM_OBJECT and o.size < small]
        runs = (
            worth_merging(run, live, self.merge_ratio)
            for run in self._stream_object_groups(stream_objects, ranges)
        )
        return (
            self._size_groups([o for o in stream_sets if o.object_id in chosen]),
            [run for run in runs if len(run) >= 2],
        )

    def _live(self, rng: StreamRange, starts: Mapping[int, int] | None = None) -> bool:
        stream = self.state.streams.get(rng.stream_id)
        if stream is not None:
            return rng.end_offset > stream.start
        start = None if starts is None else starts.get(rng.stream_id)
        return start is not None and rng.end_offset > start

    def _size_groups(self, candidates: list[ObjectRow]) -> list[list[ObjectRow]]:
        groups: list[list[ObjectRow]] = []
        current: list[ObjectRow] = []
        size = 0
        for obj in candidates:
            if current and size + obj.size > self.settings.max_object_bytes:
                groups.append(current)
                current, size = [], 0
            current.append(obj)
            size += obj.size
        groups.append(current)
        return [g for g in groups if len(g) >= 2]

    def _stream_object_groups(
        self, candidates: list[ObjectRow], ranges: dict[int, list[StreamRange]]
    ) -> list[list[ObjectRow]]:
        by_stream: dict[int, list[tuple[int, int, ObjectRow]]] = {}
        for obj in candidates:
            rs = ranges[obj.object_id]
            if len(rs) == 1:
                by_stream.setdefault(rs[0].stream_id, []).append((rs[0].start_offset, rs[0].end_offset, obj))
        groups: list[list[ObjectRow]] = []
        for items in by_stream.values():
            items.sort(key=lambda item: item[0])
            current: list[ObjectRow] = []
            size, last_end = 0, None
            for start, end, obj in items:
                if current and (start != last_end or size + obj.size > self.settings.max_object_bytes):
                    groups.append(current)
                    current, size = [], 0
                current.append(obj)
                size += obj.size
                last_end = end
            groups.append(current)
        return [g for g in groups if len(g) >= 2]

    async def _read_verified(self, obj: ObjectRow) -> tuple[bytes, list[BlockEntry]] | None:
        await self.limiter.take(obj.size)
        data = await self.state.objects.get(obj.object_key)
        try:
            position, length, crc = parse_footer(data, obj.size)
            blocks = parse_index(memoryview(data)[position : position + length], crc)
            for entry in blocks:
                verify_block(
                    memoryview(data)[entry.position : entry.position + entry.size], entry, obj.object_key
                )
        except StreamError as exc:
            log.error("compaction skips object %s: %s", obj.object_key, exc)
            return None
        return data, blocks

    async def rewrite(self, stream_id: int, transform: BatchTransform) -> int:
        """Rewrite every committed object holding data of ``stream_id``, that stream's batches
        through ``transform`` (log compaction; the other streams' data is copied as it is), with
        the same prepare / put / swap safety as a merge. Returns the bytes rewritten (0 when
        nothing was there or the swap lost a race, which the next pass retries)."""
        async with self._lock:
            state = self.state
            async with state.commit_lock:
                objects = await state.db(self.meta.committed_objects)
                ranges = await state.db(self.meta.ranges_of, [o.object_id for o in objects])
            group = [o for o in objects if any(r.stream_id == stream_id for r in ranges[o.object_id])]
            if not group:
                return 0
            held = state.streams.get(stream_id)
            fences = {stream_id: held.fence} if held is not None and held.fence is not None else None
            rewritten: list[StoredBatch] = []

            def capture(batches: list[StoredBatch]) -> list[StoredBatch]:
                rewritten.extend(transform(batches))
                return rewritten

            if not await self._compact(group, ranges, {stream_id: capture}, fences):
                return 0
            # Recent batches are also served from the log cache: it must not keep the old ones.
            state.log_cache.replace_batches(stream_id, rewritten)
            return sum(o.size for o in group)

    async def _compact(
        self,
        group: list[ObjectRow],
        ranges: dict[int, list[StreamRange]],
        transforms: Mapping[int, BatchTransform] | None = None,
        fences: dict[int, Fence] | None = None,
        starts: Mapping[int, int] | None = None,
    ) -> bool:
        # The blocks of every range with their stream's start, taken on the loop (the streams'
        # start offsets live here); what lies below the start is left in the thread.
        pieces: list[tuple[BlockEntry, memoryview, int]] = []
        for obj in group:
            loaded = await self._read_verified(obj)
            if loaded is None:
                return False
            view = memoryview(loaded[0])
            blocks = loaded[1]
            for rng in ranges[obj.object_id]:
                stream = self.state.streams.get(rng.stream_id)
                if stream is not None:
                    start = stream.start
                elif not self.copy_unheld:
                    continue  # a deleted stream
                elif starts is None:
                    start = -1  # another node's stream: copied whole
                elif rng.stream_id in starts:
                    start = starts[rng.stream_id]
                else:
                    continue  # deleted
                in_range = _blocks_of(blocks, rng)
                if in_range is None:
                    log.error(
                        "compaction skips object %s: its index does not cover stream %d's range at %d+%d",
                        obj.object_key, rng.stream_id, rng.position, rng.size,
                    )  # fmt: skip
                    return False
                pieces.extend((b, view[b.position : b.position + b.size], start) for b in in_range)
        # Splitting, ordering and laying out a merge of up to max.object.bytes is up to seconds of
        # CPU (and a log-compaction transform decodes every record): on the loop it would hold
        # every produce and fetch that long. In a thread the loop gets the interpreter back every
        # switch interval (5 ms), except while a full pass of the cyclic collector runs.
        whole = all(o.kind == ObjectKind.STREAM_OBJECT for o in group)
        layouts = await asyncio.to_thread(lay_out, pieces, self.settings.split_bytes, whole, transforms)
        if layouts is None:
            return False
        state = self.state
        reserved = await state.db(self.meta.prepare_objects, [kind for kind, _ in layouts]) if layouts else []
        state.inflight_objects.update(oid for oid, _ in reserved)
        try:
            return await self._write_and_swap(group, layouts, reserved, fences)
        finally:
            state.inflight_objects.difference_update(oid for oid, _ in reserved)

    async def _write_and_swap(
        self,
        group: list[ObjectRow],
        layouts: Layouts[StoredPiece],
        reserved: list[tuple[int, str]],
        fences: dict[int, Fence] | None = None,
    ) -> bool:
        state = self.state
        db = state.db
        replaced = [o.object_id for o in group]
        block_bytes = self.settings.block_bytes
        built = await asyncio.to_thread(lambda: [build_object(r, block_bytes) for _, r in layouts])
        for (_, key), obj in zip(reserved, built, strict=True):
            await self.limiter.take(obj.size)
            await state.objects.put(key, obj.parts)
        crashpoints.crash_point("compaction.after_put")
        new_objects = [
            NewObject(oid, obj.size, obj.ranges) for (oid, _), obj in zip(reserved, built, strict=True)
        ]
        new_rows = [
            RangeRow(r.stream_id, r.start_offset, r.end_offset, oid, key, obj.size, r.position, r.size)
            for (oid, key), obj in zip(reserved, built, strict=True)
            for r in obj.ranges
        ]
        async with state.commit_lock:
            try:
                await db(self.meta.commit_compaction, new_objects, replaced, fences)
            except (CommitConflict, StreamFenced) as exc:
                log.info("compaction of %s abandoned: %s", replaced, exc)
                await db(self.meta.abandon_prepared, [oid for oid, _ in reserved])
                return False
            crashpoints.crash_point("compaction.after_commit")
            state.replace_ranges(set(replaced), new_rows)
        if self.on_swapped is not None:
            self.on_swapped({r.stream_id for r in new_rows})
        state.metrics.compacted_bytes.inc(sum(o.size for o in group))
        log.info(
            "compacted %d objects (%d bytes) into %d",
            len(group),
            sum(o.size for o in group),
            len(new_objects),
        )
        return True

    async def _collect_garbage(self) -> int:
        state = self.state
        expired = await state.db(self.meta.expired_objects, self.settings.delete_grace_ms / 1000)
        expired = [(oid, key) for oid, key in expired if oid not in state.inflight_objects]
        if not expired:
            return 0
        await state.objects.delete(key for _, key in expired)
        crashpoints.crash_point("compaction.after_delete")
        await state.db(self.meta.forget_objects, [oid for oid, _ in expired])
        for _, key in expired:
            state.reader.forget_object(key)
        state.metrics.deleted_objects.inc(len(expired))
        return len(expired)


def worth_merging(objects: list[ObjectRow], live: Mapping[int, int], ratio: float) -> list[ObjectRow]:
    """``objects`` without the leading ones that each hold more than ``ratio`` times the live bytes
    of all that follow them: what a size-tiered merge takes. Put the heavy ones first. A stream's
    run of stream objects, oldest first, already is (the merged one leads, new ones follow it), and
    leaving out only leading objects keeps the rest of the run adjacent."""
    rest = sum(live[o.object_id] for o in objects)
    for index, obj in enumerate(objects):
        rest -= live[obj.object_id]
        if live[obj.object_id] <= ratio * rest:
            return objects[index:]
    return []


def _blocks_of(blocks: list[BlockEntry], rng: StreamRange) -> list[BlockEntry] | None:
    """The blocks (in position order) that make up ``rng``; None when they do not tile it exactly
    (the index and the metadata disagree: the object is not merged)."""
    end = rng.position + rng.size
    first = bisect.bisect_left(blocks, rng.position, key=lambda b: b.position)
    found = []
    position = rng.position
    for block in itertools.islice(blocks, first, None):
        if block.position >= end:
            break
        if block.position != position or block.stream_id != rng.stream_id:
            return None
        found.append(block)
        position += block.size
    return found if position == end else None


def lay_out(
    pieces: list[tuple[BlockEntry, memoryview, int]],
    split_bytes: int,
    whole: bool,
    transforms: Mapping[int, BatchTransform] | None = None,
) -> Layouts[StoredPiece] | None:
    """The new objects' layout for the ``(block, its bytes, its stream's start offset)`` pieces of
    a merge: each stream's data past its start in offset order, cut into runs where offsets jump; a
    stream of ``split_bytes`` or more stored bytes (every stream, when the merge is ``whole`` stream
    objects) gets a stream object of its own, the rest share one stream-set object.

    A block wholly past its stream's start goes on whole (:class:`StoredBlock`): a merge of small
    objects, which the controller repeats as they pile up, costs Python work per block, not per
    batch. Only a block the start cuts through, and every block of a stream that ``transforms``
    rewrites, is split into its batches. A transform that fails returns None (the merge is left).
    Pure, like the transforms: it runs in a worker thread."""
    per_stream: dict[int, list[StoredPiece]] = {}
    for block, data, start in pieces:
        if block.end_offset <= start:
            continue
        kept = per_stream.setdefault(block.stream_id, [])
        if block.start_offset >= start and not (transforms and block.stream_id in transforms):
            kept.append(StoredBlock(block.start_offset, block.end_offset, data, block.crc))
        else:
            kept.extend(b for b in split_batches(data) if b.next_offset > start)
    runs: list[tuple[int, list[StoredPiece]]] = []
    big: list[list[tuple[int, list[StoredPiece]]]] = []
    for stream_id in sorted(per_stream):
        stored = sorted(per_stream[stream_id], key=lambda b: b.base_offset)
        if transforms and stream_id in transforms:
            # Every piece of a rewritten stream was split into batches above.
            batches = cast(list[StoredBatch], stored)
            try:
                stored = [*check_rewrite(batches, transforms[stream_id](batches))]
            except Exception:
                log.exception("rewrite of stream %d failed; its objects are left as they are", stream_id)
                return None
        stream_runs: list[tuple[int, list[StoredPiece]]] = []
        for piece in stored:
            if stream_runs and stream_runs[-1][1][-1].next_offset == piece.base_offset:
                stream_runs[-1][1].append(piece)
            else:
                stream_runs.append((stream_id, [piece]))
        if whole or sum(stored_bytes(b) for b in stored) >= split_bytes:
            big.append(stream_runs)
        else:
            runs.extend(stream_runs)
    layouts: Layouts[StoredPiece] = [(ObjectKind.STREAM_SET, runs)] if runs else []
    return layouts + [(ObjectKind.STREAM_OBJECT, r) for r in big]
