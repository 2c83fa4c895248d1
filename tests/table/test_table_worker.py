"""The table worker plans ranges from committed offsets and tiles them into work items."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from tabletopic.s3stream.memory import MemoryStreamStore
from tabletopic.s3stream.streams import ObjectSlice
from tabletopic.table.ports import PartitionView, TopicView
from tabletopic.table.worker import PartitionRange, TableWorker, WorkItem


async def make_topic(store: MemoryStreamStore, sizes: list[int]) -> TopicView:
    partitions = []
    for index, count in enumerate(sizes):
        stream_id = await store.create_stream()
        for _ in range(count):
            await store.append(stream_id, b"x", 1)
        partitions.append(PartitionView(index, stream_id))
    return TopicView("orders", "tid", {}, tuple(partitions))


async def test_ranges_run_from_committed_offsets_to_the_high_watermark() -> None:
    store = MemoryStreamStore()
    topic = await make_topic(store, [5, 0, 3])
    ranges = await TableWorker(store).ranges(topic, {0: 2})
    assert ranges == [PartitionRange(0, 2, 5), PartitionRange(2, 0, 3)]


async def test_ranges_report_records_lost_to_retention() -> None:
    store = MemoryStreamStore()
    topic = await make_topic(store, [10])
    await store.trim(topic.partitions[0].stream_id, 6)
    assert await TableWorker(store).ranges(topic, {0: 4}) == [PartitionRange(0, 6, 10, lost=2)]


async def test_ranges_can_be_capped_per_partition() -> None:
    store = MemoryStreamStore()
    topic = await make_topic(store, [10])
    assert await TableWorker(store).ranges(topic, {}, max_records_per_partition=4) == [
        PartitionRange(0, 0, 4)
    ]


def test_work_items_tile_the_range_exactly_and_respect_the_size_cap() -> None:
    slices = [ObjectSlice(f"o{i}", 0, 100, 1, i * 10, i * 10 + 10) for i in range(5)]
    worker = TableWorker(MemoryStreamStore(), max_item_bytes=250)
    items = worker._cut("t", PartitionRange(0, 5, 47), slices)
    assert [(i.start_offset, i.end_offset, len(i.slices)) for i in items] == [
        (5, 20, 2),
        (20, 40, 2),
        (40, 47, 1),
    ]
    assert WorkItem.from_json(items[0].to_json()) == items[0]


class _Transactions:
    """The broker's transaction view: on partition 0 a transaction opened at offset 3 is still open
    and one (marker at offset 9, past every range) was aborted; partition 1's leader cannot be
    asked; partition 2 has no transactions."""

    async def last_stable_offsets(
        self, topic: TopicView, high_watermarks: Mapping[int, int]
    ) -> dict[int, int]:
        known = {0: min(high_watermarks[0], 3)}
        if 2 in high_watermarks:
            known[2] = high_watermarks[2]
        return known

    async def aborted_transactions(
        self, topic: TopicView, ranges: Mapping[int, tuple[int, int]]
    ) -> dict[int, list[tuple[int, int, int]]]:
        assert ranges == {0: (0, 3), 2: (0, 2)}
        return {0: [(7, 0, 9)], 2: []}

    async def upload_on_leaders(self, topic: TopicView) -> None:
        return None


async def test_ranges_stop_at_the_last_stable_offset_and_skip_partitions_where_it_is_unknown() -> None:
    store = MemoryStreamStore()
    topic = await make_topic(store, [6, 4, 2])
    worker = TableWorker(store, transactions=_Transactions())
    ranges = await worker.ranges(topic, {})
    assert ranges == [PartitionRange(0, 0, 3), PartitionRange(2, 0, 2)]

    async def locate(stream_id: int, start: int, end: int) -> list[ObjectSlice]:
        return [ObjectSlice(f"o{stream_id}", 0, 100, stream_id, start, end)]

    store.locate = locate  # type: ignore[method-assign]  # the memory store keeps no objects
    items = await worker.prepare(topic, ranges)
    assert [(i.partition, i.aborted) for i in items] == [(0, ((7, 0, 9),)), (2, ())]


def test_aborted_records_are_dropped_when_the_marker_is_in_a_later_slice() -> None:
    from tabletopic.records.decoder import decode_records
    from tabletopic.records.encoder import Record, build_batch
    from tabletopic.records.transactions import AbortedTransaction
    from tabletopic.s3stream.streams import StoredBatch

    worker = TableWorker(MemoryStreamStore(), transactions=_Transactions())
    slices = [ObjectSlice("o", 0, 100, 1, 0, 3)]
    (item,) = worker._cut("t", PartitionRange(0, 0, 3), slices, ((7, 0, 9),))
    item = WorkItem.from_json(item.to_json())
    assert item.aborted == ((7, 0, 9),)
    aborted_batch = build_batch(
        [Record(None, b"aborted")], transactional=True, producer_id=7, producer_epoch=0
    )
    plain_batch = build_batch([Record(None, b"kept")])
    stored = [StoredBatch(0, 1, aborted_batch), StoredBatch(1, 1, plain_batch)]
    # What the ingest task does with an item (tabletopic/table/ingest_task.py).
    decoded = decode_records(stored, 0, 2, 0, [AbortedTransaction(p, f, m) for p, f, m in item.aborted])
    assert decoded.values == [b"kept"]
    assert decoded.skipped_aborted == 1


def _item(partition: int, start: int, slices: int, size: int = 100) -> WorkItem:
    pieces = tuple(
        ObjectSlice(f"p{partition}-{i}", 0, size, partition, start + i * 10, start + i * 10 + 10)
        for i in range(slices)
    )
    return WorkItem("t", partition, start + 3, start + slices * 10 - 4, pieces, ((7, 0, 9),))


def test_balanced_items_tile_each_item_and_fill_every_core_to_the_end() -> None:
    from tabletopic.table.worker import balance_items

    items = [_item(p, 1000 * p, 12) for p in range(3)]  # three equal items, two cores
    pieces = balance_items(items, 2)
    assert len(pieces) == 6 and {p.size for p in pieces} == {600}
    for item in items:
        mine = sorted((p for p in pieces if p.partition == item.partition), key=lambda p: p.start_offset)
        assert mine[0].start_offset == item.start_offset and mine[-1].end_offset == item.end_offset
        assert all(a.end_offset == b.start_offset for a, b in itertools.pairwise(mine))
        assert all(p.aborted == item.aborted for p in mine)
        assert [s for p in mine for s in p.slices] == list(item.slices)
    # Unequal items: largest pieces first, none larger than the largest share; one core: unchanged.
    uneven = balance_items([_item(0, 0, 20), _item(1, 0, 2)], 2)
    assert [p.size for p in uneven] == sorted((p.size for p in uneven), reverse=True)
    assert max(p.size for p in uneven) <= 1100
    assert balance_items(items, 1) == items
    assert balance_items([_item(0, 0, 1)], 4) == [_item(0, 0, 1)]  # one slice cannot be cut


def test_a_job_s_items_are_grouped_into_one_equal_share_per_task() -> None:
    from tabletopic.table.worker import assign_items

    items = [_item(p, 1000 * p, 12) for p in range(3)]  # three equal items, two cores
    groups = assign_items(items, 2)
    assert len(groups) == 2
    assert [sum(i.size for i in group) for group in groups] == [1800, 1800]
    assert sorted(s.object_key for group in groups for i in group for s in i.slices) == sorted(
        s.object_key for item in items for s in item.slices
    )
    # One big item on eight cores: eight pieces, one per task.
    assert [len(group) for group in assign_items(items[:1], 8)] == [1] * 8
