"""Two rules of the :class:`~tabletopic.s3stream.streams.StreamStore` contract as code, shared by the
engine (:mod:`tabletopic.s3stream.store`) and the in-memory store (:mod:`tabletopic.s3stream.memory`)
so that both answer a fetch and resolve a long poll the same way:

- which batches a ``fetch`` returns: whole batches from the one holding the offset, at least one,
  then as many as fit in ``max_bytes``, none at or past the limit (:func:`take_batches`);
- when a ``wait_for_data`` watch wakes: once a stream's end passes its offset, or the stream is gone
  from here (:class:`DataWaiters`, :func:`watch_streams`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from tabletopic.s3stream.streams import DataWatch, StoredBatch


def take_batches(
    candidates: Sequence[StoredBatch],
    first: int,
    offset: int,
    limit: int,
    max_bytes: int,
    result: list[StoredBatch],
    size: int,
) -> tuple[int, int, bool]:
    """Append to ``result`` the batches of ``candidates[first:]`` that follow ``offset``, stopping at
    ``limit`` or when the next batch would take ``result`` (of ``size`` bytes so far) past
    ``max_bytes`` (the first batch is always taken). Returns the offset after the last batch taken,
    the new size, and whether the caller may continue with further candidates (False once a bound
    was reached or nothing was taken).

    This is the fetch hot loop for small batches: an index walk, no slicing, no property calls.
    """
    progressed = False
    for position in range(first, len(candidates)):
        batch = candidates[position]
        base = batch.base_offset
        following = base + batch.record_count
        if following <= offset:
            continue
        length = len(batch.payload)
        if base >= limit or (result and size + length > max_bytes):
            return offset, size, False
        result.append(batch)
        size += length
        offset = following
        progressed = True
    return offset, size, progressed


class DataWaiters:
    """The watches of ``wait_for_data`` calls on one stream, each waiting for the stream's end
    offset to pass the offset it asked for (Fetch long polls)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[tuple[int, DataWatch, int]] = []  # (offset, watch, stream id)

    def add(self, stream_id: int, end: int, offset: int, watch: DataWatch) -> None:
        """Wake ``watch`` once the end passes ``offset`` (at once if ``end`` does)."""
        if end > offset:
            watch.wake(stream_id)
            return
        # Pollers time their watches out; drop closed ones so that idle streams do not keep them.
        if self._pending:
            self._pending = [entry for entry in self._pending if not entry[1].closed]
        self._pending.append((offset, watch, stream_id))

    def advance(self, end: int) -> None:
        """The stream's end moved to ``end``: wake every watch it passes."""
        if not self._pending:
            return
        keep = []
        for entry in self._pending:
            offset, watch, stream_id = entry
            if watch.closed:
                continue
            if end > offset:
                watch.wake(stream_id)
            else:
                keep.append(entry)
        self._pending = keep

    def wake_all(self) -> None:
        """The stream is gone from here (closed, deleted, lost) or the store is closing: wake every
        watch, whose poller re-reads the stream and answers what it then finds."""
        pending, self._pending = self._pending, []
        for _, watch, stream_id in pending:
            if not watch.closed:
                watch.wake(stream_id)


def watch_streams(
    wanted: Iterable[tuple[int, int]], held: Callable[[int], tuple[DataWaiters, int] | None]
) -> DataWatch:
    """A :class:`DataWatch` over the ``(stream_id, offset)`` pairs; ``held`` gives a stream's
    waiters and end offset, None for a stream not held here (which wakes the watch at once)."""
    watch = DataWatch()
    for stream_id, offset in wanted:
        found = held(stream_id)
        if found is None:
            watch.wake(stream_id)
        else:
            found[0].add(stream_id, found[1], offset, watch)
    return watch


def check_rewrite(before: Sequence[StoredBatch], after: Sequence[StoredBatch]) -> list[StoredBatch]:
    """A rewrite (log compaction) must keep every batch's offsets: same count, same base offsets
    and record counts, in order. Raises ValueError otherwise (the rewrite is then not applied)."""
    if [(b.base_offset, b.record_count) for b in before] != [(b.base_offset, b.record_count) for b in after]:
        raise ValueError("a stream rewrite must keep every batch's offsets")
    return list(after)
