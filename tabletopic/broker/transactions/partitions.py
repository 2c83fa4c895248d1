"""The partition side of transactions: which transactions are open in each stream (so the last
stable offset is known) and which were aborted (the list read_committed fetches carry).

Kept in memory; the coordinator rebuilds it at start from the metadata database (the aborted index
is stored; open transactions are all finished during recovery, before the broker serves).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Stream:
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset (or lower bound)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, pid) by first
    # producer id -> offset of its last COMMIT marker in the stream that this broker knows
    last_commit: dict[int, int] = field(default_factory=dict)


class PartitionTransactions:
    """Open and aborted transactions per stream."""

    def __init__(self) -> None:
        self._streams: dict[int, _Stream] = {}

    def appended(self, stream_id: int, producer_id: int, base_offset: int) -> None:
        """A transactional batch was appended at ``base_offset``: the producer's transaction in
        this stream is open from its first such batch on."""
        self._streams.setdefault(stream_id, _Stream()).open.setdefault(producer_id, base_offset)

    def first_offset(self, stream_id: int, producer_id: int) -> int | None:
        stream = self._streams.get(stream_id)
        return None if stream is None else stream.open.get(producer_id)

    def end(self, stream_id: int, producer_id: int, marker_offset: int, committed: bool) -> None:
        """The producer's transaction in this stream was closed by its marker at ``marker_offset``."""
        stream = self._streams.setdefault(stream_id, _Stream())
        stream.open.pop(producer_id, None)
        if committed:
            self.committed(stream_id, producer_id, marker_offset)

    def committed(self, stream_id: int, producer_id: int, marker_offset: int) -> None:
        """The producer has a COMMIT marker at ``marker_offset`` in this stream."""
        last = self._streams.setdefault(stream_id, _Stream()).last_commit
        last[producer_id] = max(marker_offset, last.get(producer_id, -1))

    def aborted_from(self, stream_id: int, producer_id: int, start: int | None, marker_offset: int) -> int:
        """The first offset of an aborted transaction's entry in the aborted index: its first batch
        here, else ``start`` (where the coordinator says it joined), else its marker; never at or
        before the producer's previous COMMIT marker in this stream.

        ``start`` is a lower bound only (for a stream led elsewhere, its end as the metadata
        database last recorded it, which lags the leader), and so is a first batch rebuilt from it
        after a leader change. Readers skip the producer's batches from the entry's first offset to
        the ABORT marker, whatever markers come between, so an entry starting before the previous
        COMMIT marker would hide the records of that committed transaction. (Reaching back over an
        ABORT marker hides nothing that is not aborted already.)"""
        stream = self._streams.get(stream_id)
        first = None if stream is None else stream.open.get(producer_id)
        if first is None:
            first = marker_offset if start is None else start
        previous = None if stream is None else stream.last_commit.get(producer_id)
        if previous is not None and previous < marker_offset:
            first = max(first, previous + 1)
        return min(first, marker_offset)

    def add_aborted(self, stream_id: int, producer_id: int, first: int, last: int) -> None:
        """Record an aborted transaction; one of the producer's from the same first offset is
        replaced (a marker written again after a failure ends it later), as in the stored index."""
        stream = self._streams.setdefault(stream_id, _Stream())
        stream.aborted = [e for e in stream.aborted if (e[0], e[2]) != (first, producer_id)]
        bisect.insort(stream.aborted, (first, last, producer_id))

    def aborted_by(self, stream_id: int, producer_id: int, marker_offset: int) -> bool:
        """Whether the aborted index has the producer's entry ending at ``marker_offset``: the
        ABORT marker there closed a transaction, and its leader stored what it aborted."""
        stream = self._streams.get(stream_id)
        return stream is not None and any(
            last == marker_offset and pid == producer_id for _, last, pid in stream.aborted
        )

    def last_stable_offset(self, stream_id: int, high_watermark: int) -> int:
        """The first offset of the oldest open transaction, or the high watermark."""
        stream = self._streams.get(stream_id)
        if stream is None or not stream.open:
            return high_watermark
        return min(high_watermark, min(stream.open.values()))

    def aborted_between(self, stream_id: int, start: int, end: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of aborted transactions overlapping ``[start, end)``, as
        Fetch's aborted_transactions list wants them."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return []
        return [(pid, first) for first, last, pid in stream.aborted if first < end and last >= start]

    def aborted_transactions(self, stream_id: int, start: int, end: int) -> list[tuple[int, int, int]]:
        """``(producer id, first offset, marker offset)`` of aborted transactions overlapping
        ``[start, end)`` (for readers that see the marker only later, such as table ingestion)."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return []
        return [(pid, first, last) for first, last, pid in stream.aborted if first < end and last >= start]

    def forget_stream(self, stream_id: int) -> None:
        self._streams.pop(stream_id, None)
