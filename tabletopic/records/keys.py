"""Which records of a batch have no key: a compacted topic refuses those (Kafka answers
INVALID_RECORD), since compaction keeps the latest value per key and a keyless record has none."""

from __future__ import annotations

from tabletopic.records.columns import DecodedRecords, append_records
from tabletopic.records.compression import decompress
from tabletopic.records.header import HEADER_SIZE, BatchHeader


def keyless_records(batch: bytes | memoryview, header: BatchHeader) -> list[int]:
    """The indexes within the batch (Kafka's ``batch_index``) of the records whose key is null;
    empty for a control batch.

    Raises:
        RecordBatchError: the records cannot be decoded.
    """
    if header.is_control:
        return []
    holder = DecodedRecords(0)
    data = decompress(header.compression, memoryview(batch)[HEADER_SIZE:])
    append_records(holder, data, header, 0, 0, header.last_offset_delta + 1)
    return [index for index, key in enumerate(holder.keys) if key is None]
