"""Per-record timestamps of one stored batch, for ListOffsets: Kafka resolves a timestamp (and
MAX_TIMESTAMP) to the exact record, which needs the records, not just the batch header."""

from __future__ import annotations

from tabletopic.records.columns import DecodedRecords, append_records
from tabletopic.records.compression import decompress
from tabletopic.records.header import HEADER_SIZE, parse_stored_header


def record_timestamps(batch: bytes | memoryview, base_offset: int) -> list[tuple[int, int]]:
    """``(offset, timestamp)`` of each record of a stored batch whose first record has offset
    ``base_offset`` (LogAppendTime batches give every record the batch's append time).

    Raises:
        RecordBatchError: the batch cannot be decoded.
    """
    header = parse_stored_header(batch)
    holder = DecodedRecords(0)
    data = decompress(header.compression, memoryview(batch)[HEADER_SIZE:])
    append_records(holder, data, header, base_offset, base_offset, base_offset + header.last_offset_delta + 1)
    return list(zip(holder.offsets, holder.timestamps, strict=True))


def first_at_or_after(batch: bytes | memoryview, base_offset: int, target: int) -> tuple[int, int] | None:
    """The first record (offset order) whose timestamp is at least ``target``, or None."""
    for offset, timestamp in record_timestamps(batch, base_offset):
        if timestamp >= target:
            return offset, timestamp
    return None
