"""The table worker embedded in every broker: turns "ingest partition P from offset X" into work
items a Spark task can execute straight against object storage.

For the partitions this broker leads it makes everything up to the high watermark readable from
object storage (``StreamStore.flush``) and answers with the object slices that hold the range, so the
Spark job never goes through the broker. In a cluster the coordinator of a topic runs on the leader
of its partition 0, and the other partitions' leaders are other brokers: with the object WAL every
acknowledged record of theirs is already a committed object recorded in the shared metadata
database, so :meth:`TableWorker.refresh` has the store read their offsets and slices from
there instead of asking those brokers; nothing a leader acknowledged is missed, and a partition
that is moving between brokers does not hold the table up.

With transactions, ranges stop at the last stable offset and carry the aborted transactions they
overlap, so only committed records reach the table. Both come from the
:class:`~tabletopic.table.ports.TransactionView`, which knows them for every partition wherever it
is led (another broker's partitions: from their leader); a partition whose last stable offset is
unknown this cycle (its leader moving or down) is not ingested until it is known. Large ranges are
cut into several items so a topic with one busy partition still spreads over the cluster's cores.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from tabletopic.records.header import parse_stored_header
from tabletopic.s3stream.streams import ObjectSlice, StreamStore
from tabletopic.table.ports import TopicView, TransactionView

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkItem:
    """Ingest offsets ``[start_offset, end_offset)`` of one partition from these object slices."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    slices: tuple[ObjectSlice, ...]
    # Aborted transactions ``(producer id, first offset, marker offset)`` overlapping the range:
    # their records are dropped even when the ABORT marker lies beyond ``end_offset``.
    aborted: tuple[tuple[int, int, int], ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {
                "topic": self.topic,
                "partition": self.partition,
                "start_offset": self.start_offset,
                "end_offset": self.end_offset,
                "slices": [asdict(s) for s in self.slices],
                "aborted": [list(a) for a in self.aborted],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> WorkItem:
        raw = json.loads(text)
        return cls(
            topic=raw["topic"],
            partition=raw["partition"],
            start_offset=raw["start_offset"],
            end_offset=raw["end_offset"],
            slices=tuple(ObjectSlice(**s) for s in raw["slices"]),
            aborted=tuple((int(p), int(f), int(m)) for p, f, m in raw.get("aborted", ())),
        )

    @property
    def size(self) -> int:
        return sum(s.size for s in self.slices)


@dataclass(frozen=True, slots=True)
class PartitionRange:
    partition: int
    start_offset: int
    end_offset: int
    # Records trimmed by retention before they reached the table (start was below the log start).
    lost: int = 0


class TableWorker:
    def __init__(
        self,
        streams: StreamStore,
        max_item_bytes: int = 64 << 20,
        transactions: TransactionView | None = None,
    ) -> None:
        self._streams = streams
        self._max_item_bytes = max_item_bytes
        self._transactions = transactions

    async def refresh(self, topic: TopicView) -> None:
        """See partitions other brokers lead as their leaders committed them (cluster mode), after
        asking those leaders to upload what they acknowledged (so a cycle ingests up to now, not
        up to their last upload)."""
        if self._transactions is not None:
            await self._transactions.upload_on_leaders(topic)
        await self._streams.refresh([p.stream_id for p in topic.partitions])

    def high_watermark(self, stream_id: int) -> int:
        return self._streams.stream_info(stream_id).end_offset

    def log_start(self, stream_id: int) -> int:
        return self._streams.stream_info(stream_id).start_offset

    async def timestamp_at(self, stream_id: int, offset: int) -> int | None:
        """The timestamp (ms) of the stored batch holding ``offset``: its first record's (CreateTime)
        or its append time (LogAppendTime); None when nothing is stored there. Reads one batch,
        usually from the log cache."""
        batches = await self._streams.fetch(stream_id, offset, 1, offset + 1)
        if not batches:
            return None
        header = parse_stored_header(batches[0].payload)
        return header.max_timestamp if header.log_append_time else header.base_timestamp

    async def ranges(
        self,
        topic: TopicView,
        next_offsets: Mapping[int, int],
        max_records_per_partition: int | None = None,
    ) -> list[PartitionRange]:
        """The offset range ready for each partition: from the committed next offset up to the high
        watermark (the stream's end offset: only acknowledged data), with transactions up to the
        last stable offset (only committed data); none for a partition whose last stable offset is
        unknown this time."""
        infos = {view.partition: self._streams.stream_info(view.stream_id) for view in topic.partitions}
        stable: dict[int, int] | None = None
        if self._transactions is not None:
            stable = await self._transactions.last_stable_offsets(
                topic, {partition: info.end_offset for partition, info in infos.items()}
            )
        result: list[PartitionRange] = []
        for view in topic.partitions:
            info = infos[view.partition]
            if stable is not None and view.partition not in stable:
                continue  # never past an unknown last stable offset: next cycle
            start = next_offsets.get(view.partition, info.start_offset)
            lost = 0
            if start < info.start_offset:
                lost = info.start_offset - start
                log.warning(
                    "topic %s partition %d: offsets %d..%d were removed by retention before they were "
                    "committed to the table",
                    topic.name,
                    view.partition,
                    start,
                    info.start_offset - 1,
                )
                start = info.start_offset
            end = info.end_offset
            if stable is not None:
                # Only committed data: never past the oldest open transaction.
                end = max(start, min(end, stable[view.partition]))
            if max_records_per_partition is not None:
                end = min(end, start + max_records_per_partition)
            if end > start or lost:
                result.append(PartitionRange(view.partition, start, end, lost))
        return result

    async def prepare(self, topic: TopicView, ranges: list[PartitionRange]) -> list[WorkItem]:
        """Flush the streams and locate the object slices of ``ranges``, cut into work items."""
        by_partition = {p.partition: p.stream_id for p in topic.partitions}
        wanted = [r for r in ranges if r.end_offset > r.start_offset]
        if not wanted:
            return []
        await self._streams.flush([by_partition[r.partition] for r in wanted])
        aborted: dict[int, list[tuple[int, int, int]]] = {}
        if self._transactions is not None:
            aborted = await self._transactions.aborted_transactions(
                topic, {r.partition: (r.start_offset, r.end_offset) for r in wanted}
            )
        items: list[WorkItem] = []
        for r in wanted:
            stream_id = by_partition[r.partition]
            slices = await self._streams.locate(stream_id, r.start_offset, r.end_offset)
            items.extend(self._cut(topic.name, r, slices, tuple(aborted.get(r.partition, ()))))
        return items

    def _cut(
        self,
        topic: str,
        r: PartitionRange,
        slices: list[ObjectSlice],
        aborted: tuple[tuple[int, int, int], ...] = (),
    ) -> list[WorkItem]:
        """Group consecutive slices into items of at most ``max_item_bytes`` (at least one slice each)
        that tile the range exactly: each item starts where the previous ended, boundaries fall on
        slice ends clipped to the range, the last item ends at the range's end."""
        groups: list[list[ObjectSlice]] = []
        size = 0
        for s in slices:
            if groups and size + s.size <= self._max_item_bytes:
                groups[-1].append(s)
                size += s.size
            else:
                groups.append([s])
                size = s.size
        items: list[WorkItem] = []
        cursor = r.start_offset
        for index, group in enumerate(groups):
            last = index == len(groups) - 1
            end = r.end_offset if last else max(cursor, min(group[-1].end_offset, r.end_offset))
            if end > cursor:
                items.append(WorkItem(topic, r.partition, cursor, end, tuple(group), aborted))
            cursor = end
        return items


def balance_items(items: Sequence[WorkItem], slots: int) -> list[WorkItem]:
    """Cut ``items`` (at slice boundaries) into about a multiple of ``slots`` pieces of similar size,
    largest first, so a job's tasks keep every core busy to the end.

    A job lasts as long as its slowest round of tasks: three equal items on two cores take two
    rounds with one core idle in the second (75 % use), their six halves take three full rounds.
    Pieces are never larger than the items they come from, so the task memory bound holds; an
    item of one slice cannot be cut.
    """
    if slots <= 1 or not items:
        return list(items)
    total = sum(item.size for item in items)
    rounds = -(-len(items) // slots)
    share = max(total / (rounds * slots), 1.0)
    pieces: list[WorkItem] = []
    for item in items:
        # Up to the next whole share (10 % slack): three equal items on two cores become six.
        pieces += split_item(item, max(1, math.ceil(item.size / share - 0.1)))
    return sorted(pieces, key=lambda piece: piece.size, reverse=True)


def split_item(item: WorkItem, parts: int) -> list[WorkItem]:
    """``item`` as at most ``parts`` consecutive items of about equal stored bytes that tile its
    offsets exactly (boundaries on slice ends)."""
    if parts <= 1 or len(item.slices) <= 1:
        return [item]
    share = item.size / parts
    groups: list[list[ObjectSlice]] = [[]]
    size = 0
    for piece in item.slices:
        if groups[-1] and size + piece.size / 2 > share * len(groups) and len(groups) < parts:
            groups.append([])
        groups[-1].append(piece)
        size += piece.size
    out: list[WorkItem] = []
    cursor = item.start_offset
    for index, group in enumerate(groups):
        last = index == len(groups) - 1
        end = item.end_offset if last else max(cursor, min(group[-1].end_offset, item.end_offset))
        if end > cursor:  # a group past the item's end (none in practice) holds nothing to read
            out.append(WorkItem(item.topic, item.partition, cursor, end, tuple(group), item.aborted))
        cursor = end
    return out


def cap_items(
    ranges: Sequence[PartitionRange], items: Sequence[WorkItem], max_bytes: int
) -> tuple[list[PartitionRange], list[WorkItem], bool]:
    """Keep a prefix of each partition's items, taking the partitions in turn, while their stored
    bytes stay within ``max_bytes`` (the first item always); the ranges end where the kept items
    end. Returns ``(ranges, items, capped)``; a range with nothing kept stays, empty, for the
    records it lost to retention."""
    queues: dict[int, list[WorkItem]] = {}
    for item in items:
        queues.setdefault(item.partition, []).append(item)
    kept: list[WorkItem] = []
    size = 0
    while any(queues.values()):
        for queue in queues.values():
            if queue and (not kept or size + queue[0].size <= max_bytes):
                size += queue[0].size
                kept.append(queue.pop(0))
        if all(not queue or size + queue[0].size > max_bytes for queue in queues.values()):
            break
    if len(kept) == len(items):
        return list(ranges), list(items), False
    ends = {item.partition: item.end_offset for item in kept}
    capped = [
        PartitionRange(r.partition, r.start_offset, ends.get(r.partition, r.start_offset), r.lost)
        for r in ranges
    ]
    return capped, kept, True


def assign_items(items: Sequence[WorkItem], tasks: int) -> list[list[WorkItem]]:
    """The items of one job as at most ``tasks`` groups of about equal stored bytes, one group per
    task: :func:`balance_items` pieces, each given to the lightest group so far, largest first. A
    task runs its group's items one after the other (its memory bound holds per item), so a job
    with as many tasks as cores has no second round for a core to idle in."""
    pieces = balance_items(items, tasks)
    groups: list[list[WorkItem]] = [[] for _ in range(min(tasks, len(pieces)))]
    loads = [0] * len(groups)
    for piece in pieces:
        lightest = loads.index(min(loads))
        groups[lightest].append(piece)
        loads[lightest] += piece.size
    return [group for group in groups if group]
