"""Record batch (magic v2) headers: find the batches in a Produce payload and check them without
touching a single record, which is where Python time would go (DESIGN.md: per-record work costs
~100x; the broker never decodes records).

Layout of a batch header (offsets in bytes)::

    0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 | 17 crc u32 |
    21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64 |
    43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32 | 57 recordCount i32 | 61 records

The CRC32C covers everything from ``attributes`` to the end of the batch, so ``baseOffset`` and
``partitionLeaderEpoch`` can be rewritten freely: batches are stored as received and the offset is
prefixed at read time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c
from kio.schema.errors import ErrorCode

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The header fields of one record batch plus where it sits in the payload it came in."""

    position: int
    size: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.record_count - 1


class InvalidBatch(ValueError):
    """A batch the broker must refuse; ``error_code`` is what the Produce response carries."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def parse_batches(payload: bytes | memoryview, verify_crc: bool = True) -> list[BatchHeader]:
    """Split a Produce ``records`` payload into its batches and validate each header.

    Raises:
        InvalidBatch: with UNSUPPORTED_FOR_MESSAGE_FORMAT for magic < 2, CORRUPT_MESSAGE for a bad
            length, truncation or CRC mismatch, INVALID_RECORD for an empty batch.
    """
    view = memoryview(payload)
    headers: list[BatchHeader] = []
    position = 0
    total = len(view)
    while position < total:
        if total - position < MAGIC_OFFSET + 1:
            raise InvalidBatch(ErrorCode.corrupt_message, f"truncated batch header at byte {position}")
        magic = view[position + MAGIC_OFFSET]
        if magic < 2:
            raise InvalidBatch(
                ErrorCode.unsupported_for_message_format,
                f"message format v{magic} is not supported; only record batch v2 is",
            )
        if magic > 2 or total - position < HEADER_SIZE:
            raise InvalidBatch(ErrorCode.corrupt_message, f"bad batch header at byte {position}")
        (
            _base_offset,
            batch_length,
            _epoch,
            _magic,
            crc,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        ) = _HEADER.unpack_from(view, position)
        size = LOG_OVERHEAD + batch_length
        if batch_length < HEADER_SIZE - LOG_OVERHEAD or position + size > total:
            raise InvalidBatch(
                ErrorCode.corrupt_message,
                f"batch length {batch_length} at byte {position} does not fit the {total}-byte payload",
            )
        if record_count <= 0 or last_offset_delta != record_count - 1:
            raise InvalidBatch(
                ErrorCode.invalid_record,
                f"batch at byte {position} has record count {record_count} and last offset delta "
                f"{last_offset_delta}",
            )
        if verify_crc:
            actual = crc32c.crc32c(view[position + ATTRIBUTES_OFFSET : position + size])
            if actual != crc:
                raise InvalidBatch(
                    ErrorCode.corrupt_message,
                    f"batch at byte {position} has CRC {crc:#010x}, computed {actual:#010x}",
                )
        headers.append(
            BatchHeader(
                position,
                size,
                magic,
                crc,
                attributes,
                last_offset_delta,
                base_timestamp,
                max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                record_count,
            )
        )
        position += size
    return headers


def with_log_append_time(batch: bytes | memoryview, append_time_ms: int) -> bytearray:
    """A copy of ``batch`` stamped with LogAppendTime: timestamp type bit set, maxTimestamp set to
    the append time (readers use it for every record), CRC recomputed."""
    stamped = bytearray(batch)
    (attributes,) = _INT16.unpack_from(stamped, ATTRIBUTES_OFFSET)
    _INT16.pack_into(stamped, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(stamped, MAX_TIMESTAMP_OFFSET, append_time_ms)
    _UINT32.pack_into(stamped, CRC_OFFSET, crc32c.crc32c(memoryview(stamped)[ATTRIBUTES_OFFSET:]))
    return stamped


def max_timestamp_of(batch: bytes | memoryview) -> int:
    """The maxTimestamp field of a stored batch (for ListOffsets by timestamp and retention.ms)."""
    return int(_INT64.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0])


def base_timestamp_of(batch: bytes | memoryview) -> int:
    return int(_INT64.unpack_from(batch, 27)[0])
