"""Sample records and stored-batch stand-ins shared by the codec's tests."""

from __future__ import annotations

from typing import Any, NamedTuple

from tabletopic.records.compression import Compression
from tabletopic.records.encoder import Record, build_batch
from tabletopic.records.header import record_count_of

T0 = 1_700_000_000_000

RECORDS = [
    Record(b"k1", b"v1", [("h", b"x")]),
    Record(None, b"v2" * 300, []),
    Record(b"k3", None, [("a", None), ("b", b"")]),
    Record(b"", b"", []),
    Record(b"k5", bytes(range(256)) * 20, [("\u00e9t\u00e9", b"\x00\xff")]),
]

CODECS = list(Compression)


class Stored(NamedTuple):
    """What a store hands the decoder: the assigned base offset, the record count, the bytes."""

    base_offset: int
    record_count: int
    payload: bytes | memoryview


def batch(
    records: list[Record] = RECORDS, compression: Compression = Compression.NONE, **fields: Any
) -> bytes:
    """``records`` encoded with the sample timestamps (T0, T0 + 1, ...)."""
    return build_batch(records, compression=compression, timestamp=T0, **fields)


def stored(batches: list[bytes], first_offset: int = 0) -> list[Stored]:
    """``batches`` placed one after another from ``first_offset``, as a stream assigns offsets."""
    out = []
    offset = first_offset
    for payload in batches:
        count = record_count_of(payload)
        out.append(Stored(offset, count, payload))
        offset += count
    return out
