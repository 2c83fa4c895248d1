"""Two rules of the :class:`~tabletopic.s3stream.streams.StreamStore` contract as code, shared by the
engine (:mod:`tabletopic.s3stream.store`) and the in-memory store (:mod:`tabletopic.s3stream.memory`)
so that both answer a fetch and resolve a long poll the same way:

- which batches a ``fetch`` returns: whole batches from the one holding the offset, at least one,
  then as many as fit in ``max_bytes``, none at or past the limit (:func:`take_batches`);
- when a ``wait_for_data`` future resolves: once the stream's end passes its offset
  (:class:`DataWaiters`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tabletopic.s3stream.streams import StoredBatch


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
    """The futures of ``wait_for_data`` calls on one stream, each waiting for the stream's end
    offset to pass the offset it asked for (Fetch long polls)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[tuple[int, asyncio.Future[None]]] = []

    def wait(self, end: int, offset: int) -> asyncio.Future[None]:
        """A future resolved once the end passes ``offset`` (already resolved if ``end`` does)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if end > offset:
            future.set_result(None)
        else:
            # Callers time their waits out; drop theirs so that idle streams do not accumulate them.
            self._pending = [(o, w) for o, w in self._pending if not w.done()]
            self._pending.append((offset, future))
        return future

    def advance(self, end: int) -> None:
        """The stream's end moved to ``end``: resolve every waiter it passes."""
        if not self._pending:
            return
        keep = []
        for offset, waiter in self._pending:
            if waiter.done():
                continue
            if end > offset:
                waiter.set_result(None)
            else:
                keep.append((offset, waiter))
        self._pending = keep

    def fail(self, error: Exception) -> None:
        """The stream is gone: every waiter gets ``error`` (marked retrieved, so an abandoned
        waiter logs nothing)."""
        for _, waiter in self._pending:
            if not waiter.done():
                waiter.set_exception(error)
                waiter.exception()
        self._pending = []

    def cancel(self) -> None:
        """The store is closing: cancel every waiter."""
        for _, waiter in self._pending:
            if not waiter.done():
                waiter.cancel()


def check_rewrite(before: Sequence[StoredBatch], after: Sequence[StoredBatch]) -> list[StoredBatch]:
    """A rewrite (log compaction) must keep every batch's offsets: same count, same base offsets
    and record counts, in order. Raises ValueError otherwise (the rewrite is then not applied)."""
    if [(b.base_offset, b.record_count) for b in before] != [(b.base_offset, b.record_count) for b in after]:
        raise ValueError("a stream rewrite must keep every batch's offsets")
    return list(after)
