"""Transactions in the log: control batches (COMMIT/ABORT markers) and read-committed filtering.

A transaction coordinator ends a producer's transaction by writing a control batch (attributes
bit 5, transactional) into every partition it touched. Its single record has the key
``version int16, type int16`` (type 0 ABORT, 1 COMMIT) and the value
``version int16, coordinatorEpoch int32``. A reader at read-committed isolation skips the markers
and drops the data batches whose transaction was aborted.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from tabletopic.records.columns import DecodedRecords, append_records
from tabletopic.records.compression import decompress
from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import HEADER_SIZE, BatchHeader


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1


CONTROL_RECORD_VERSION = 0
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """As in Kafka's Fetch response / transaction index: ``producer_id``'s transaction that began at
    ``first_offset`` was aborted; ``last_offset`` is its ABORT marker's offset when known. The
    marker may lie outside the decoded range, which is why the broker's list is needed at all."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


def control_record(control_type: ControlType, coordinator_epoch: int = 0) -> tuple[bytes, bytes]:
    """The key and value of a control batch's record."""
    return (
        _CONTROL_KEY.pack(CONTROL_RECORD_VERSION, control_type),
        _CONTROL_VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch),
    )


def control_type_of(batch: bytes | memoryview, header: BatchHeader) -> int | None:
    """The marker type of a control batch (the second int16 of its record's key), None when the
    batch's records cannot be read."""
    try:
        data = decompress(header.compression, memoryview(batch)[HEADER_SIZE:])
        holder = DecodedRecords(0)
        append_records(holder, data, header, 0, 0, 1 << 62)
    except RecordBatchError:
        return None
    if not holder.keys or holder.keys[0] is None or len(holder.keys[0]) < _CONTROL_KEY.size:
        return None
    return int(_CONTROL_KEY.unpack_from(holder.keys[0], 0)[1])


def aborted_batch_offsets(
    batches: Sequence[tuple[int, BatchHeader, bytes | memoryview]], aborted: Sequence[AbortedTransaction]
) -> set[int]:
    """Base offsets of transactional batches whose transaction was aborted.

    ``batches`` are ``(base offset, header, batch bytes)`` in offset order. A data batch belongs to
    the transaction its producer's next marker closes. When that marker is in ``batches`` it
    decides; otherwise the broker's aborted list does: an entry covers the producer's batches from
    ``first_offset`` up to its ``last_offset`` (the marker) or, when that is unknown, up to the
    producer's next marker seen here -- Kafka's consumer rule.
    """
    transactional = [entry for entry in batches if entry[1].is_transactional]
    if not transactional:
        return set()
    markers: dict[int, list[tuple[int, bool]]] = {}  # producer id -> [(offset, is_abort)] ascending
    for offset, header, batch in transactional:
        if header.is_control:
            kind = control_type_of(batch, header)
            if kind is not None:
                markers.setdefault(header.producer_id, []).append((offset, kind == ControlType.ABORT))
    result: set[int] = set()
    for offset, header, _batch in transactional:
        if header.is_control:
            continue
        pid = header.producer_id
        own = markers.get(pid, [])
        index = bisect.bisect_right(own, (offset, True))
        if index < len(own):
            if own[index][1]:
                result.add(offset)
            continue
        previous_marker = own[index - 1][0] if index else None
        for txn in aborted:
            if txn.producer_id != pid or txn.first_offset > offset:
                continue
            if txn.last_offset is not None and txn.last_offset < offset:
                continue
            if previous_marker is not None and previous_marker >= txn.first_offset:
                continue  # that transaction already ended at a marker before this batch
            result.add(offset)
            break
    return result
