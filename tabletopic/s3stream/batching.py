"""When the object WAL starts its next batch object: group commit over PUTs.

An append in ``s3stream.wal.mode=object`` is acknowledged once the batch object holding it is PUT
and committed. A batch object starts as soon as an upload slot is free (at most
``s3stream.wal.object.max.in.flight.uploads`` uploads at once) and at least
``s3stream.wal.object.batch.ms`` after the previous one started; it holds whatever arrived while
the earlier uploads were under way. A lone append is so acknowledged after one upload, not after a
window, and under load the batches grow by themselves: each collects what arrived during the
uploads before it. ``batch.ms`` is the ceiling of an append's wait for its batch to start while a
slot is free, and the cost knob: at most ``1000 / batch.ms`` uploads (PUTs) per second.

Pure bookkeeping (no event loop, no clock of its own) so the policy is tested on its own; the store
asks :meth:`BatchPacer.wait` when a batch could start and the uploader reports starts and ends.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BatchPacer:
    """The upload slots and the spacing of batch-object starts (times in seconds, any clock)."""

    max_in_flight: int
    min_interval: float
    in_flight: int = 0
    last_start: float | None = None

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {self.max_in_flight}")
        if self.min_interval < 0:
            raise ValueError(f"min_interval must not be negative, not {self.min_interval}")

    def has_slot(self) -> bool:
        return self.in_flight < self.max_in_flight

    def wait(self, now: float) -> float | None:
        """Seconds until the next batch may start (0: now), or None while every slot is busy (the
        end of an upload is the next moment to ask again)."""
        if not self.has_slot():
            return None
        if self.last_start is None:
            return 0.0
        return max(0.0, self.last_start + self.min_interval - now)

    def started(self, now: float) -> None:
        """An upload took a slot (the uploader starts one only when :meth:`has_slot`)."""
        self.in_flight += 1
        self.last_start = now

    def finished(self) -> None:
        """An upload ended (committed or failed): its slot is free."""
        if self.in_flight <= 0:
            raise RuntimeError("an upload finished that never started")
        self.in_flight -= 1
