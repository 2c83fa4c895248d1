"""Stored batches read back as records, for the tests that check what a compaction kept."""

from __future__ import annotations

from tabletopic.records.decoder import decode_records
from tabletopic.s3stream.streams import StoredBatch


def decoded(batches: list[StoredBatch]) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record, in offset order."""
    end = batches[-1].next_offset
    records = decode_records(batches, 0, end)
    assert not records.errors, records.errors
    return list(zip(records.offsets, records.keys, records.values, strict=True))
