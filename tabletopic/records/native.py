"""The per-record loop in C: aiokafka's compiled record-batch reader, behind the same contract as
:func:`~tabletopic.records.columns.append_records`.

aiokafka 0.14 ships a Cython build of its v2 batch reader (``aiokafka.record._crecords``, a private
module, hence the exact pin in pyproject.toml). It walks a batch's records and builds each key,
value and header in C, about 4x the pure-Python loop; what remains in Python here is appending five
fields per record to the columns.

It is an accelerator, never the authority: whenever it raises, or reports something this package's
loop would not accept, :func:`append_records_native` returns False and the caller runs the
pure-Python loop on the same batch, which either decodes it or names the fault. So a damaged batch
gets exactly the error the Python loop gives, and the two paths produce the same columns (property
test in ``tests/records/test_native.py``). The reader needs an uncompressed batch that carries the
store's base offset, so the batch is copied once with its header rewritten (base offset, length,
codec bits); the CRC was checked on the original bytes before.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

from tabletopic.records.columns import DecodedRecords
from tabletopic.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
)

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


@cache
def _reader() -> Any:
    """aiokafka's compiled batch class, or None where it is not installed (or was built without C)."""
    try:
        from aiokafka.record._crecords import DefaultRecordBatch  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a pinned dependency; kept for slim installs
        return None
    return DefaultRecordBatch


def available() -> bool:
    """Whether the C record reader can be used in this process."""
    return _reader() is not None


def append_records_native(
    out: DecodedRecords,
    header_bytes: bytes | memoryview,
    records_block: bytes | memoryview,
    header: BatchHeader,
    base_offset: int,
    start: int,
    end: int,
) -> bool:
    """Append the batch's records within ``[start, end)`` to ``out`` (all or nothing) with the C
    reader; False, with ``out`` untouched, when the Python loop must decode this batch instead.

    Args:
        out: the columns to append to.
        header_bytes: the batch's 61-byte header as stored.
        records_block: its records block, decompressed.
        header: the parsed header (its CRC already checked).
        base_offset: the offset the store gave the batch's first record.
        start: first offset wanted.
        end: one past the last offset wanted.
    """
    reader = _reader()
    if reader is None:
        return False
    rewritten = bytearray(header_bytes[:HEADER_SIZE])
    _INT64.pack_into(rewritten, 0, base_offset)
    _INT32.pack_into(rewritten, 8, HEADER_SIZE - LOG_OVERHEAD + len(records_block))
    _INT16.pack_into(rewritten, ATTRIBUTES_OFFSET, header.attributes & ~COMPRESSION_MASK)
    rewritten += records_block
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[tuple[str, bytes | None], ...]] = []
    add_offset = offsets.append
    add_ts = timestamps.append
    add_key = keys.append
    add_value = values.append
    add_headers = headers.append
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
    last = base_offset + header.last_offset_delta
    whole = start <= base_offset and last < end
    try:
        batch = reader(rewritten)
        for record in batch:
            offset = record.offset
            if whole or start <= offset < end:
                add_offset(offset)
                add_ts(record.timestamp)
                add_key(record.key)
                add_value(record.value)
                hdrs = record.headers
                add_headers(tuple(hdrs) if hdrs else no_headers)
            elif not base_offset <= offset <= last:
                return False
    except Exception:  # any fault: the Python loop names it
        return False
    if offsets and (min(offsets) < base_offset or max(offsets) > last):
        return False  # an offset delta outside the batch: the Python loop reports it
    out.offsets += offsets
    out.timestamps += timestamps
    out.keys += keys
    out.values += values
    out.headers += headers
    return True
