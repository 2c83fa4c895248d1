"""One share-partition of a KIP-932 share group as a sans-IO state machine: which records of the
partition are in flight, who holds them and how often they were delivered. The driver
(:mod:`tabletopic.broker.groups.share_coordinator`) reads the log, persists snapshots and turns the
lock deadlines into timers; everything that decides lives here, so it is testable without asyncio.

The in-flight window is ``[spso, speo)``: below the share-partition start offset (SPSO) every
record is done with (acknowledged or archived), from the share-partition end offset (SPEO) on no
record was ever acquired. Inside the window each offset has a state:

* AVAILABLE — may be acquired (again); its delivery count says how often it was delivered;
* ACQUIRED — locked to one member until it acknowledges it or the lock deadline passes;
* ACKNOWLEDGED / ARCHIVED — done with (accepted; rejected, a gap, or over the delivery limit).

The SPSO moves forward over done records only, so it never passes a record still to deliver, and a
record is acquired by at most one member at a time (a single state per offset guarantees it).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from kio.schema.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's numbers for the record states (they are what the share-state records store)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """The acknowledge types of ShareFetch/ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Offsets ``first..last`` (inclusive) acquired together, all at ``delivery_count``."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateRange:
    """A persisted run of offsets in one state with one delivery count (acquired ones are stored
    as AVAILABLE: after a restart nobody holds them)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What survives a restart: the window's start, its end and the runs inside it."""

    start_offset: int
    end_offset: int
    state_epoch: int
    ranges: tuple[StateRange, ...]


class SharePartition:
    """The in-flight records of one topic-partition for one share group.

    Args:
        start_offset: the SPSO to begin at (from ``share.auto.offset.reset`` or a snapshot).
        delivery_limit: ``group.share.delivery.count.limit``: a record released (or timed out)
            after this many deliveries is archived instead of made available again.
        lock_ms: ``group.share.record.lock.duration.ms``, the acquisition lock.
        max_locks: ``group.share.partition.max.record.locks``, the most records in flight.
    """

    def __init__(self, start_offset: int, delivery_limit: int, lock_ms: int, max_locks: int) -> None:
        self.spso = start_offset
        self.speo = start_offset
        self.state_epoch = 0
        self.delivery_limit = delivery_limit
        self.lock_ms = lock_ms
        self.max_locks = max_locks
        self.records: dict[int, InFlight] = {}

    @classmethod
    def restore(cls, snapshot: Snapshot, delivery_limit: int, lock_ms: int, max_locks: int) -> SharePartition:
        partition = cls(snapshot.start_offset, delivery_limit, lock_ms, max_locks)
        partition.speo = max(snapshot.end_offset, snapshot.start_offset)
        partition.state_epoch = snapshot.state_epoch
        for run in snapshot.ranges:
            for offset in range(max(run.first, partition.spso), min(run.last + 1, partition.speo)):
                state = RecordState.AVAILABLE if run.state is RecordState.ACQUIRED else run.state
                partition.records[offset] = InFlight(state, run.delivery_count)
        for offset in range(partition.spso, partition.speo):
            partition.records.setdefault(offset, InFlight(RecordState.AVAILABLE, 0))
        partition._advance()
        return partition

    # -- acquisition ----------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where a read for this partition should start: the first available record."""
        for offset in range(self.spso, self.speo):
            if self.records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.speo

    def skip_to(self, log_start: int) -> None:
        """Records below the log start offset are gone (retention): the window starts there."""
        if log_start <= self.spso:
            return
        for offset in range(self.spso, min(log_start, self.speo)):
            self.records.pop(offset, None)
        self.spso = log_start
        self.speo = max(self.speo, log_start)

    def acquire(
        self, member_id: str, first: int, end: int, max_records: int, now_ms: int
    ) -> list[AcquiredRange]:
        """Lock to ``member_id`` up to ``max_records`` available records of ``[first, end)`` (the
        offsets the driver read from the log); returns them as runs of one delivery count."""
        acquired: list[AcquiredRange] = []
        budget = max_records
        deadline = now_ms + self.lock_ms
        for offset in range(max(first, self.spso), end):
            if budget <= 0:
                break
            record = self.records.get(offset)
            if record is None:
                if offset < self.speo or len(self.records) >= self.max_locks:
                    break
                record = self.records[offset] = InFlight(RecordState.AVAILABLE, 0)
                self.speo = offset + 1
            if record.state is not RecordState.AVAILABLE:
                continue
            record.state, record.member_id, record.deadline_ms = RecordState.ACQUIRED, member_id, deadline
            record.delivery_count += 1
            budget -= 1
            last = acquired[-1] if acquired else None
            if last is not None and last.last == offset - 1 and last.delivery_count == record.delivery_count:
                acquired[-1] = AcquiredRange(last.first, offset, last.delivery_count)
            else:
                acquired.append(AcquiredRange(offset, offset, record.delivery_count))
        return acquired

    # -- acknowledgement ------------------------------------------------------------------------

    def acknowledge(self, member_id: str, first: int, last: int, types: tuple[int, ...]) -> ErrorCode:
        """Apply one acknowledgement batch; all or nothing. ``types`` has one entry for the whole
        batch or one per offset. Offsets this member does not hold are INVALID_RECORD_STATE."""
        count = last - first + 1
        if count <= 0 or not types or (len(types) != 1 and len(types) != count):
            return ErrorCode.invalid_request
        if any(t not in AckType._value2member_map_ for t in types):
            return ErrorCode.invalid_request
        for offset in range(first, last + 1):
            record = self.records.get(offset)
            if record is None or record.state is not RecordState.ACQUIRED or record.member_id != member_id:
                return ErrorCode.invalid_record_state
        for index, offset in enumerate(range(first, last + 1)):
            ack = AckType(types[0] if len(types) == 1 else types[index])
            record = self.records[offset]
            if ack is AckType.ACCEPT:
                self._finish(record, RecordState.ACKNOWLEDGED)
            elif ack is AckType.RELEASE:
                self._release(record)
            elif ack is AckType.RENEW:
                record.deadline_ms += self.lock_ms
            else:  # REJECT, GAP
                self._finish(record, RecordState.ARCHIVED)
        self._advance()
        return ErrorCode.none

    def release_member(self, member_id: str) -> bool:
        """Give back everything ``member_id`` holds (it left, or its share session closed)."""
        return self._release_where(lambda r: r.member_id == member_id)

    def expire(self, now_ms: int) -> bool:
        """Release records whose lock ran out; True if any did."""
        return self._release_where(lambda r: r.deadline_ms <= now_ms)

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.records.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def acquired_by(self, member_id: str) -> list[int]:
        return [o for o, r in sorted(self.records.items()) if r.member_id == member_id]

    # -- persistence ----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return Snapshot(self.spso, self.speo, self.state_epoch, tuple(self._runs()))

    def _runs(self) -> Iterator[StateRange]:
        run: StateRange | None = None
        for offset in range(self.spso, self.speo):
            record = self.records[offset]
            state = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            if (
                run is not None
                and run.last == offset - 1
                and (run.state, run.delivery_count)
                == (
                    state,
                    record.delivery_count,
                )
            ):
                run = StateRange(run.first, offset, state, run.delivery_count)
                continue
            if run is not None:
                yield run
            run = StateRange(offset, offset, state, record.delivery_count)
        if run is not None:
            yield run

    # -- internals ------------------------------------------------------------------------------

    def _release_where(self, selected: Callable[[InFlight], bool]) -> bool:
        released = False
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and selected(record):
                self._release(record)
                released = True
        if released:
            self._advance()
        return released

    def _release(self, record: InFlight) -> None:
        if record.delivery_count >= self.delivery_limit:
            self._finish(record, RecordState.ARCHIVED)
        else:
            record.state, record.member_id, record.deadline_ms = RecordState.AVAILABLE, None, 0

    @staticmethod
    def _finish(record: InFlight, state: RecordState) -> None:
        record.state, record.member_id, record.deadline_ms = state, None, 0

    def _advance(self) -> None:
        """Move the SPSO over the done records at the start of the window."""
        while self.spso < self.speo:
            record = self.records.get(self.spso)
            if record is None or record.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self.records[self.spso]
            self.spso += 1


def runs(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Contiguous ``(first, last)`` runs of sorted ``offsets``."""
    result: list[tuple[int, int]] = []
    for offset in sorted(offsets):
        if result and result[-1][1] == offset - 1:
            result[-1] = (result[-1][0], offset)
        else:
            result.append((offset, offset))
    return result
