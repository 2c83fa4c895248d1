"""The 61-byte record batch header: its layout, one :class:`BatchHeader` type, and the checks the
broker and the table decoder make before trusting a batch.

Layout (offsets in bytes)::

    0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 | 17 crc u32 |
    21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64 |
    43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32 | 57 recordCount i32 | 61 records

``batchLength`` counts the bytes after itself, so a batch is ``LOG_OVERHEAD + batchLength`` bytes.
Attributes: bits 0-2 compression codec, bit 3 timestamp type (LogAppendTime), bit 4 transactional,
bit 5 control.

Everything here reads the header only: checking a batch costs the same whatever it holds, which
keeps the broker's Produce path free of per-record Python work.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from tabletopic.records.crc import batch_crc, write_crc
from tabletopic.records.errors import BatchFault, RecordBatchError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC = 2
MAGIC_OFFSET = 16
ATTRIBUTES_OFFSET = 21
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
RECORD_COUNT_OFFSET = 57

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # set: LogAppendTime, maxTimestamp is every record's timestamp
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

HEADER = struct.Struct(">qiiBIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    """Where a batch starts in the buffer it was read from (``position``: 0 unless the buffer held
    several batches), then its header fields in wire order.

    A named tuple rather than a dataclass: the broker builds one per produced batch, and a tuple is
    built several times faster than a frozen dataclass (which sets each field through
    ``object.__setattr__``).
    """

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
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
    def size(self) -> int:
        """The whole batch's size in bytes, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> int:
        """The records block's codec (see :class:`~tabletopic.records.compression.Compression`)."""
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.record_count - 1


def read_header(buffer: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The header at ``position``, unchecked; the caller made sure ``HEADER_SIZE`` bytes are there."""
    return BatchHeader(position, *HEADER.unpack_from(buffer, position))


def validate_batches(payload: bytes | memoryview, verify_crc: bool = True) -> list[BatchHeader]:
    """Split a Produce ``records`` payload into its batches and validate each header, as a broker
    must before appending them (the records themselves are never read).

    Raises:
        RecordBatchError: UNSUPPORTED_FORMAT for magic < 2; CORRUPT for a bad length, truncation or
            CRC mismatch; INVALID_RECORD for an empty batch or one whose last offset delta is not
            its record count - 1.
    """
    view = memoryview(payload)
    headers: list[BatchHeader] = []
    position = 0
    total = len(view)
    while position < total:
        if total - position < MAGIC_OFFSET + 1:
            raise RecordBatchError(f"truncated batch header at byte {position}")
        magic = view[position + MAGIC_OFFSET]
        if magic < MAGIC:
            raise RecordBatchError(
                f"message format v{magic} is not supported; only record batch v2 is",
                BatchFault.UNSUPPORTED_FORMAT,
            )
        if magic > MAGIC or total - position < HEADER_SIZE:
            raise RecordBatchError(f"bad batch header at byte {position}")
        header = read_header(view, position)
        size = header.size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + size > total:
            raise RecordBatchError(
                f"batch length {header.batch_length} at byte {position} does not fit the {total}-byte payload"
            )
        if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
            raise RecordBatchError(
                f"batch at byte {position} has record count {header.record_count} and last offset delta "
                f"{header.last_offset_delta}",
                BatchFault.INVALID_RECORD,
            )
        if verify_crc:
            actual = batch_crc(view[position : position + size])
            if actual != header.crc:
                raise RecordBatchError(
                    f"batch at byte {position} has CRC {header.crc:#010x}, computed {actual:#010x}"
                )
        headers.append(header)
        position += size
    return headers


def parse_stored_header(batch: bytes | memoryview) -> BatchHeader:
    """The header of one stored batch (``batch`` is exactly one batch), with the checks a reader
    needs before walking its records: v2, and the length field agrees with the stored size.

    An empty batch (record count 0) is accepted: a reader just finds nothing in it.

    Raises:
        RecordBatchError: CORRUPT for truncation or a length mismatch, UNSUPPORTED_FORMAT for a
            magic other than 2, INVALID_RECORD for a negative record count.
    """
    if len(batch) < HEADER_SIZE:
        raise RecordBatchError(f"truncated batch: {len(batch)} bytes, header needs {HEADER_SIZE}")
    header = read_header(batch)
    if header.magic != MAGIC:
        raise RecordBatchError(
            f"unsupported record batch magic {header.magic} (only v2)", BatchFault.UNSUPPORTED_FORMAT
        )
    if header.size != len(batch):
        raise RecordBatchError(f"batch length field says {header.size} bytes but the batch has {len(batch)}")
    if header.record_count < 0:
        raise RecordBatchError(f"negative record count {header.record_count}", BatchFault.INVALID_RECORD)
    return header


def check_crc(batch: bytes | memoryview, header: BatchHeader) -> None:
    """Raise a CORRUPT :class:`RecordBatchError` unless the stored batch's CRC matches its bytes."""
    actual = batch_crc(batch)
    if actual != header.crc:
        raise RecordBatchError(f"CRC32C mismatch: header says {header.crc:#010x}, data has {actual:#010x}")


def with_log_append_time(batch: bytes | memoryview, append_time_ms: int) -> bytearray:
    """A copy of ``batch`` stamped with LogAppendTime: timestamp type bit set, maxTimestamp set to
    the append time (readers use it for every record), CRC recomputed."""
    stamped = bytearray(batch)
    (attributes,) = _INT16.unpack_from(stamped, ATTRIBUTES_OFFSET)
    _INT16.pack_into(stamped, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(stamped, MAX_TIMESTAMP_OFFSET, append_time_ms)
    write_crc(stamped)
    return stamped


def max_timestamp_of(batch: bytes | memoryview) -> int:
    """The maxTimestamp field of a stored batch (for ListOffsets by timestamp and retention.ms)."""
    return int(_INT64.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0])


def base_timestamp_of(batch: bytes | memoryview) -> int:
    """The baseTimestamp field: the first record's timestamp when the batch is CreateTime."""
    return int(_INT64.unpack_from(batch, BASE_TIMESTAMP_OFFSET)[0])


def record_count_of(batch: bytes | memoryview) -> int:
    """The recordCount field (what a store needs to assign the batch its offsets)."""
    return int(_INT32.unpack_from(batch, RECORD_COUNT_OFFSET)[0])
