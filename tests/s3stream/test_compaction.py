"""Compaction: merging, splitting, dropping trimmed and deleted data, GC; never a lost or doubled
offset."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tabletopic.s3stream import compaction
from tabletopic.s3stream.compaction import RateLimiter
from tabletopic.s3stream.db import CommitConflict, ObjectKind, ObjectRow
from tabletopic.s3stream.objects import BlockEntry, StreamRange
from tests.support.store_harness import StoreHarness, payload_for
from tests.support.waiting import wait_until


async def uploads(store, streams: list[int], rounds: int, size: int, start: int = 0) -> None:
    """``rounds`` separate uploads, each holding one batch per stream."""
    for i in range(start, start + rounds):
        await asyncio.gather(*(store.append(sid, payload_for(sid, i, size), 1) for sid in streams))
        await store.flush()


async def assert_intact(store, streams: list[int], count: int, size: int, first: int = 0) -> None:
    for sid in streams:
        batches = await store.fetch(sid, first, 1 << 30)
        assert [b.base_offset for b in batches] == list(range(first, count))
        assert all(bytes(b.payload) == payload_for(sid, b.base_offset, size) for b in batches)


def drop_caches(store) -> None:
    store.state.log_cache.capacity = 0
    store.state.log_cache.evict()
    store.state.block_cache.clear()


async def committed(store):
    return await asyncio.to_thread(store.state.meta.committed_objects)


async def test_small_stream_set_objects_are_merged_and_the_old_ones_deleted(harness: StoreHarness) -> None:
    store = await harness.open()
    streams = [await store.create_stream() for _ in range(5)]
    await uploads(store, streams, 6, 500)
    before = await committed(store)
    assert len(before) == 6
    report = await store.compactor.run_once()
    assert report.merged_stream_set == 6
    after = await committed(store)
    assert len(after) == 1 and after[0].kind == "stream_set"
    drop_caches(store)
    await assert_intact(store, streams, 6, 500)
    await store.compactor.run_once()  # grace 0: the replaced objects go now
    keys = {k for k, _ in harness.object_store().list("s3stream/")}
    assert keys == {after[0].object_key}
    store = await harness.reopen(store)
    drop_caches(store)
    await assert_intact(store, streams, 6, 500)


async def test_a_big_stream_is_split_out_into_its_own_stream_object(local_harness: StoreHarness) -> None:
    store = await local_harness.open()
    big, small = await store.create_stream(), await store.create_stream()
    for i in range(8):  # each upload: 10 KB of the big stream, under the 64 KiB split size
        await store.append(big, payload_for(big, i, 10_000), 1)
        await store.append(small, payload_for(small, i, 100), 1)
        await store.flush()
    assert {o.kind for o in await committed(store)} == {"stream_set"}
    await store.compactor.run_once()
    kinds = sorted(o.kind for o in await committed(store))
    assert kinds == ["stream", "stream_set"]
    drop_caches(store)
    await assert_intact(store, [big], 8, 10_000)
    await assert_intact(store, [small], 8, 100)


async def test_a_merge_and_a_rewrite_do_their_cpu_work_off_the_event_loop(
    local_harness: StoreHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Splitting, ordering and laying out a merge of up to max.object.bytes (and a log-compaction
    transform over it) is up to seconds of CPU: on the loop it would hold every produce and fetch."""
    threads: dict[str, set[int]] = {"split": set(), "build": set(), "transform": set()}

    def recorded(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            threads[name].add(threading.get_ident())
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(compaction, "split_batches", recorded("split", compaction.split_batches))
    monkeypatch.setattr(compaction, "build_object", recorded("build", compaction.build_object))
    store = await local_harness.open()
    streams = [await store.create_stream() for _ in range(3)]
    await uploads(store, streams, 4, 500)
    assert (await store.compactor.run_once()).merged_stream_set == 4
    await uploads(store, streams, 2, 500, start=4)
    assert await store.rewrite(streams[0], recorded("transform", lambda batches: batches)) > 0
    loop_thread = threading.get_ident()
    assert all(seen and loop_thread not in seen for seen in threads.values()), threads
    drop_caches(store)
    await assert_intact(store, streams, 6, 500)


async def test_adjacent_small_stream_objects_of_a_stream_are_merged(local_harness: StoreHarness) -> None:
    store = await local_harness.open(split_bytes=4096)
    sid = await store.create_stream()
    await uploads(store, [sid], 5, 5000)
    assert [o.kind for o in await committed(store)] == ["stream"] * 5
    report = await store.compactor.run_once()
    assert report.merged_stream_objects == 5
    assert [o.kind for o in await committed(store)] == ["stream"]
    drop_caches(store)
    await assert_intact(store, [sid], 5, 5000)


async def test_a_merged_stream_object_waits_for_as_much_again(local_harness: StoreHarness) -> None:
    store = await local_harness.open(split_bytes=4096)
    sid = await store.create_stream()
    await uploads(store, [sid], 4, 5000)
    assert (await store.compactor.run_once()).merged_stream_objects == 4
    await uploads(store, [sid], 1, 5000, start=4)
    assert (await store.compactor.run_once()).merged_stream_objects == 0  # fails if every pass re-merges
    await uploads(store, [sid], 3, 5000, start=5)
    assert (await store.compactor.run_once()).merged_stream_objects == 5  # four new against the four
    assert [o.kind for o in await committed(store)] == ["stream"]
    drop_caches(store)
    await assert_intact(store, [sid], 8, 5000)


async def test_trimmed_and_deleted_data_is_dropped(local_harness: StoreHarness) -> None:
    store = await local_harness.open()
    keep, gone = await store.create_stream(), await store.create_stream()
    await uploads(store, [keep, gone], 4, 800)
    await store.trim(keep, 2)
    await store.delete_stream(gone)
    await store.compactor.run_once()
    await store.compactor.run_once()
    objects = await committed(store)
    assert len(objects) == 1
    ranges = await asyncio.to_thread(store.state.meta.ranges_of, [objects[0].object_id])
    assert [(r.stream_id, r.start_offset, r.end_offset) for r in ranges[objects[0].object_id]] == [
        (keep, 2, 4)
    ]
    drop_caches(store)
    await assert_intact(store, [keep], 4, 800, first=2)


async def test_a_merge_copies_whole_blocks_and_splits_only_the_one_a_start_cuts(
    local_harness: StoreHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller merges small objects again as new ones pile up: a block wholly past its
    stream's start goes into the new object as it is, so the merge costs per block, not per batch."""
    split: list[int] = []

    def counted(data: Any) -> Any:
        split.append(len(data))
        return real_split(data)

    real_split = compaction.split_batches
    monkeypatch.setattr(compaction, "split_batches", counted)
    store = await local_harness.open()
    streams = [await store.create_stream() for _ in range(3)]
    await uploads(store, streams, 6, 300)
    assert (await store.compactor.run_once()).merged_stream_set == 6
    assert split == []  # nothing to cut: every block was copied
    # The merged object holds one block per stream (offsets 0-6); a start inside it cuts it. As
    # much again is new, so the merged object joins the merge (size-tiered).
    await uploads(store, streams, 6, 300, start=6)
    await store.trim(streams[0], 3)
    assert (await store.compactor.run_once()).merged_stream_set == 7
    assert len(split) == 1
    drop_caches(store)
    await assert_intact(store, streams[1:], 12, 300)
    await assert_intact(store, streams[:1], 12, 300, first=3)
    objects = await committed(store)
    assert len(objects) == 1
    ranges = await asyncio.to_thread(store.state.meta.ranges_of, [objects[0].object_id])
    assert sorted((r.stream_id, r.start_offset, r.end_offset) for r in ranges[objects[0].object_id]) == [
        (streams[0], 3, 12),
        (streams[1], 0, 12),
        (streams[2], 0, 12),
    ]
    store = await local_harness.reopen(store)
    drop_caches(store)
    await assert_intact(store, streams[1:], 12, 300)


async def test_a_merged_object_waits_until_as_much_again_is_new(local_harness: StoreHarness) -> None:
    """Size-tiered merging: the object a pass made is not read and written again for every few new
    uploads, only once they hold as much live data as it does; the uploads merge among themselves."""
    store = await local_harness.open()
    streams = [await store.create_stream() for _ in range(3)]
    await uploads(store, streams, 8, 400)
    assert (await store.compactor.run_once()).merged_stream_set == 8
    [merged] = await committed(store)
    await uploads(store, streams, 3, 400, start=8)
    assert (await store.compactor.run_once()).merged_stream_set == 3  # fails if every pass re-merges
    objects = await committed(store)
    assert merged in objects and len(objects) == 2
    await uploads(store, streams, 2, 400, start=11)
    assert (await store.compactor.run_once()).merged_stream_set == 2  # the 3 outweighs the two new
    assert len(await committed(store)) == 3  # 8, 3 and 2 uploads' worth
    await uploads(store, streams, 3, 400, start=13)
    assert (await store.compactor.run_once()).merged_stream_set == 6  # 3 + 2 + 3: as much as the 8
    assert len(await committed(store)) == 1
    drop_caches(store)
    await assert_intact(store, streams, 16, 400)


async def test_an_object_mostly_trimmed_weighs_what_it_still_holds(local_harness: StoreHarness) -> None:
    """The tiers count live bytes: an object whose streams moved past most of it is merged (and the
    dead part dropped) with what is new, not kept whole until enough new data outweighs its size."""
    store = await local_harness.open()
    old, kept = await store.create_stream(), await store.create_stream()
    for i in range(6):
        await store.append(old, payload_for(old, i, 4000), 1)
        await store.append(kept, payload_for(kept, i, 100), 1)
        await store.flush()
    await store.compactor.run_once()
    [merged] = await committed(store)
    await store.trim(old, 6)
    for first in (6, 10):  # two uploads of four batches each: 8 batches of 100 B against 6 still live
        appends = (store.append(kept, payload_for(kept, i, 100), 1) for i in range(first, first + 4))
        await asyncio.gather(*appends)
        await store.flush()
    # Fails if the merged object weighs its size (24 KB, most of it trimmed): only the two would merge.
    assert (await store.compactor.run_once()).merged_stream_set == 3
    [after] = await committed(store)
    assert after.size < merged.size / 10
    drop_caches(store)
    await assert_intact(store, [kept], 14, 100)


def test_worth_merging_leaves_out_the_leading_objects_that_outweigh_the_rest() -> None:
    def rows(*sizes: int) -> list[ObjectRow]:
        return [ObjectRow(i, f"k{i}", ObjectKind.STREAM_SET, size, 0.0) for i, size in enumerate(sizes)]

    def kept(*sizes: int) -> list[int]:
        objects = rows(*sizes)
        live = {o.object_id: o.size for o in objects}
        return [o.size for o in compaction.worth_merging(objects, live, 1.0)]

    assert kept(10, 3, 3, 3) == [3, 3, 3]
    assert kept(9, 3, 3, 3) == [9, 3, 3, 3]
    assert kept(100, 20, 5, 5) == [5, 5]
    assert kept(100, 20, 5, 1) == []
    assert kept(4, 4) == [4, 4]
    assert kept(5) == []


def test_an_index_that_does_not_tile_a_range_leaves_the_object_unmerged() -> None:
    """The blocks of a range come from the object's own index; should it and the metadata
    disagree, the merge is not made from a guess."""
    blocks = [
        BlockEntry(1, 0, 5, 0, 100, 0),
        BlockEntry(1, 5, 9, 100, 80, 0),
        BlockEntry(2, 0, 3, 180, 50, 0),
    ]
    assert compaction._blocks_of(blocks, StreamRange(1, 0, 9, 0, 180)) == blocks[:2]
    assert compaction._blocks_of(blocks, StreamRange(2, 0, 3, 180, 50)) == blocks[2:]
    assert compaction._blocks_of(blocks, StreamRange(1, 0, 9, 0, 150)) is None  # ends inside a block
    assert compaction._blocks_of(blocks, StreamRange(1, 0, 3, 0, 230)) is None  # takes another stream's
    assert compaction._blocks_of(blocks, StreamRange(1, 0, 9, 10, 170)) is None  # starts inside one


async def test_objects_whose_data_is_all_trimmed_become_garbage(local_harness: StoreHarness) -> None:
    store = await local_harness.open(small_object_bytes=1024)  # nothing counts as small: no merging
    sid = await store.create_stream()
    await uploads(store, [sid], 3, 2000)
    await store.trim(sid, 2)
    report = await store.compactor.run_once()
    assert report.unreferenced == 2
    assert len(await committed(store)) == 1
    await assert_intact(store, [sid], 3, 2000, first=2)


async def test_replaced_objects_stay_readable_during_the_grace_period(local_harness: StoreHarness) -> None:
    store = await local_harness.open(delete_grace_ms=60_000)
    sid = await store.create_stream()
    await uploads(store, [sid], 3, 700)
    old_keys = {o.object_key for o in await committed(store)}
    await store.compactor.run_once()
    listed = {k for k, _ in local_harness.object_store().list("s3stream/")}
    assert old_keys <= listed  # still there for readers that looked them up before the swap


async def test_a_swap_of_objects_already_replaced_is_refused(local_harness: StoreHarness) -> None:
    store = await local_harness.open()
    sid = await store.create_stream()
    await uploads(store, [sid], 2, 300)
    ids = [o.object_id for o in await committed(store)]
    await asyncio.to_thread(store.state.meta.commit_compaction, [], ids[:1])
    with pytest.raises(CommitConflict):
        await asyncio.to_thread(store.state.meta.commit_compaction, [], ids)


async def test_rate_limiter_spreads_bytes_over_time() -> None:
    limiter = RateLimiter(1_000_000)
    started = time.monotonic()
    for _ in range(3):
        await limiter.take(500_000)
    assert time.monotonic() - started >= 0.45


async def test_background_compaction_runs_while_appending(local_harness: StoreHarness) -> None:
    store = await local_harness.open(compaction_interval_ms=50)
    streams = [await store.create_stream() for _ in range(3)]
    await uploads(store, streams, 12, 300)

    async def compacted() -> bool:
        return len(await committed(store)) < 12

    await wait_until(compacted, message="background compaction merged objects")
    assert len(await committed(store)) < 12
    drop_caches(store)
    await assert_intact(store, streams, 12, 300)


async def test_a_reader_with_stale_ranges_refreshes_them_after_another_node_compacts(
    local_harness: StoreHarness,
) -> None:
    local_harness.wal_mode = "object"
    writer = await local_harness.open()
    sid = await writer.create_stream()
    await uploads(writer, [sid], 4, 900)
    reader = await local_harness.open()  # a second node sharing the metadata DB and the bucket
    await writer.compactor.run_once()
    await writer.compactor.run_once()  # grace 0: the objects the reader knows are gone now
    drop_caches(reader)
    await assert_intact(reader, [sid], 4, 900)


async def test_locate_looks_again_when_compaction_deleted_an_object_it_had_resolved(
    harness: StoreHarness,
) -> None:
    # The race the table pipeline met: locate read a stream's ranges, then compaction merged and
    # (grace 0) deleted the object of one of them before locate read that object's index.
    from tabletopic.s3stream.objects import fetch_slice

    store = await harness.open()
    sid = await store.create_stream()
    await uploads(store, [sid], 6, 500)
    drop_caches(store)
    reader = store.state.reader
    original = reader.blocks_of
    raced: list[object] = []

    async def compacting_first(rng):  # type: ignore[no-untyped-def]
        if not raced:
            raced.append(rng)
            await store.compactor.run_once()  # merge
            await store.compactor.run_once()  # delete the replaced objects
            store.state.block_cache.clear()
        return await original(rng)

    reader.blocks_of = compacting_first
    slices = await store.locate(sid, 0, 6)
    assert raced
    batches = [b for piece in slices for b in fetch_slice(harness.object_store(), piece)]
    assert [b.base_offset for b in batches] == list(range(6))
    assert all(bytes(b.payload) == payload_for(sid, b.base_offset, 500) for b in batches)
