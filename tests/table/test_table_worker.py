"""The table worker plans ranges from committed offsets and tiles them into work items."""

from __future__ import annotations

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
    ranges = TableWorker(store).ranges(topic, {0: 2})
    assert ranges == [PartitionRange(0, 2, 5), PartitionRange(2, 0, 3)]


async def test_ranges_report_records_lost_to_retention() -> None:
    store = MemoryStreamStore()
    topic = await make_topic(store, [10])
    await store.trim(topic.partitions[0].stream_id, 6)
    assert TableWorker(store).ranges(topic, {0: 4}) == [PartitionRange(0, 6, 10, lost=2)]


async def test_ranges_can_be_capped_per_partition() -> None:
    store = MemoryStreamStore()
    topic = await make_topic(store, [10])
    assert TableWorker(store).ranges(topic, {}, max_records_per_partition=4) == [PartitionRange(0, 0, 4)]


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
