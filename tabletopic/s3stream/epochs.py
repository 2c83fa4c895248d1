"""A stream's epoch history: the epoch of every ownership it has had and the offset each began at.

Every time a stream is opened with a new epoch (cluster mode: a new leader takes the partition),
the metadata database records ``(epoch, start offset)``, where the start offset is the stream's end
as committed when the new owner fenced the old one. Nothing the old owner appends after that point
can be committed, so the history is exact: offsets ``[start(e), start(next epoch))`` were written
under epoch ``e``.

The broker answers Kafka's leader-epoch questions from it (KIP-101/KIP-320): which epoch wrote the
batch at an offset, and where a given epoch ended. A stream written without ownership (one node)
has no rows and is one epoch, 0, from offset 0, which is what a single Kafka broker that never
changed leader reports.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["NO_EPOCHS", "UNDEFINED_EPOCH", "UNDEFINED_OFFSET", "EpochHistory"]

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
_ONE_EPOCH = ((0, 0),)  # a stream never opened with an epoch: epoch 0 from the start


@dataclass(frozen=True, slots=True)
class EpochHistory:
    """``(epoch, start offset)`` pairs in increasing epoch order (and so non-decreasing offsets)."""

    entries: tuple[tuple[int, int], ...] = ()
    _starts: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_starts", tuple(start for _, start in self.entries))

    @classmethod
    def of(cls, rows: Iterable[tuple[int, int]]) -> EpochHistory:
        """From database rows in any order; an epoch listed twice keeps its first start."""
        seen: dict[int, int] = {}
        for epoch, start in sorted(rows):
            seen.setdefault(epoch, start)
        return cls(tuple(seen.items()))

    @property
    def latest(self) -> int:
        """The current epoch (0 for a stream that never had one)."""
        return self.entries[-1][0] if self.entries else 0

    def _effective(self) -> tuple[tuple[int, int], ...]:
        return self.entries or _ONE_EPOCH

    def with_epoch(self, epoch: int, start: int) -> EpochHistory:
        """This history plus ``epoch`` beginning at ``start`` (unchanged if it is not newer)."""
        if self.entries and epoch <= self.latest:
            return self
        return EpochHistory((*self.entries, (epoch, start)))

    def epoch_at(self, offset: int) -> int:
        """The epoch that wrote the batch starting at ``offset``: the latest epoch beginning at or
        before it. Offsets before the first recorded epoch (data written before epochs were kept)
        are reported under that first epoch."""
        if not self.entries:
            return 0
        # An epoch that wrote nothing begins where the next one does: take the last of equal starts.
        index = bisect.bisect_right(self._starts, offset) - 1
        return self.entries[max(index, 0)][0]

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """Kafka's ``OffsetForLeaderEpoch`` answer for ``epoch``: ``(the largest epoch <= epoch,
        the offset where that epoch ended)``; the current epoch ends at ``log_end``. An epoch newer
        than every recorded one, or UNDEFINED, has no answer ``(-1, -1)``; one older than every
        recorded epoch is answered with itself and the first recorded epoch's start.
        """
        if epoch < 0:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest:
            return epoch, log_end
        entries = self._effective()
        higher = bisect.bisect_right([e for e, _ in entries], epoch)
        if higher >= len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        end = entries[higher][1]
        if higher == 0:
            return epoch, end
        return entries[higher - 1][0], end


NO_EPOCHS = EpochHistory()  # a stream used without ownership: epoch 0 throughout
