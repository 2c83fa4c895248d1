"""Whether a batch holds a record without a key: a compacted topic refuses those (Kafka answers
INVALID_RECORD), since compaction keeps the latest value per key and a keyless record has none."""

from __future__ import annotations

from tabletopic.records.columns import DecodedRecords, append_records
from tabletopic.records.compression import decompress
from tabletopic.records.header import HEADER_SIZE, BatchHeader


def has_keyless_record(batch: bytes | memoryview, header: BatchHeader) -> bool:
    """True when a data batch holds a record whose key is null (control batches never do).

    Raises:
        RecordBatchError: the records cannot be decoded.
    """
    if header.is_control:
        return False
    holder = DecodedRecords(0)
    data = decompress(header.compression, memoryview(batch)[HEADER_SIZE:])
    append_records(holder, data, header, 0, 0, header.last_offset_delta + 1)
    return any(key is None for key in holder.keys)
