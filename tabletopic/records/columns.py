"""The per-record loop of the table pipeline: a batch's records block -> parallel columns.

Each record is ``length, attributes, timestampDelta, offsetDelta, key, value, headers`` with
zig-zag varints for every length and delta (headers: a count, then key and value per header).

This code runs for millions of records per Spark task, so the loop is written for CPython speed:
one ``bytes`` buffer per batch (indexing ``bytes`` is faster than ``memoryview``), a single-byte fast
path for varints (almost every length and delta fits in 7 bits), locals instead of attribute lookups,
and columns appended to plain lists that Arrow converts in C.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import BatchHeader


@dataclass(frozen=True, slots=True)
class BatchError:
    """One batch that could not be decoded; its offsets are missing from the output."""

    base_offset: int
    record_count: int
    reason: str


@dataclass(slots=True)
class DecodedRecords:
    """Decoded records of one partition as parallel columns (one entry per record).

    ``headers`` holds one tuple of ``(key, value)`` pairs per record; header keys are UTF-8 text
    (malformed UTF-8 is replaced by U+FFFD: a bad header key must not lose the record, and Arrow
    refuses lone surrogates), values bytes or None.
    """

    partition: int
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[tuple[tuple[str, bytes | None], ...]] = field(default_factory=list)
    errors: list[BatchError] = field(default_factory=list)
    skipped_control: int = 0
    skipped_aborted: int = 0

    def __len__(self) -> int:
        return len(self.offsets)


def append_records(
    out: DecodedRecords, buf: bytes, header: BatchHeader, base_offset: int, start: int, end: int
) -> None:
    """Append the batch's records within ``[start, end)`` to ``out`` (all or nothing): ``buf`` is
    its decompressed records block, ``base_offset`` the offset the store gave its first record."""
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[tuple[str, bytes | None], ...]] = []
    base_ts = header.base_timestamp
    append_time = header.max_timestamp if header.log_append_time else None
    n = len(buf)
    pos = 0
    add_offset = offsets.append
    add_ts = timestamps.append
    add_key = keys.append
    add_value = values.append
    add_headers = headers.append
    varint = read_uvarint
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
    # When the whole batch lies inside the range the per-record range test is skipped.
    last_delta = header.last_offset_delta
    whole = start <= base_offset and base_offset + last_delta < end
    # Varints are inlined for one and two bytes (lengths up to 8 KiB, deltas up to 4095): a call
    # costs more than the decoding itself.
    try:
        for _ in range(header.record_count):
            # record length (zig-zag varint)
            b = buf[pos]
            if b < 0x80:
                length = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                length = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                length, pos = varint(buf, pos)
            length = (length >> 1) ^ -(length & 1)
            rec_end = pos + length
            if length < 6 or rec_end > n:
                raise RecordBatchError(f"record length {length} runs past the batch ({n - pos} bytes left)")
            pos += 1  # record attributes (unused)
            b = buf[pos]
            if b < 0x80:
                ts_delta = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                ts_delta = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                ts_delta, pos = varint(buf, pos)
            ts_delta = (ts_delta >> 1) ^ -(ts_delta & 1)
            b = buf[pos]
            if b < 0x80:
                off_delta = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                off_delta = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                off_delta, pos = varint(buf, pos)
            off_delta = (off_delta >> 1) ^ -(off_delta & 1)
            # key
            b = buf[pos]
            if b < 0x80:
                klen = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                klen = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                klen, pos = varint(buf, pos)
            klen = (klen >> 1) ^ -(klen & 1)
            if klen < 0:
                key = None
            else:
                key = buf[pos : pos + klen]
                pos += klen
            # value
            b = buf[pos]
            if b < 0x80:
                vlen = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                vlen = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                vlen, pos = varint(buf, pos)
            vlen = (vlen >> 1) ^ -(vlen & 1)
            if vlen < 0:
                value = None
            else:
                value = buf[pos : pos + vlen]
                pos += vlen
            # headers
            b = buf[pos]
            if b == 0:
                pos += 1
                hdrs = no_headers
            else:
                hdrs, pos = _headers(buf, pos)
            if pos != rec_end:
                raise RecordBatchError(f"record at offset delta {off_delta} has {rec_end - pos} stray bytes")
            if not 0 <= off_delta <= last_delta:
                raise RecordBatchError(f"offset delta {off_delta} outside the batch's 0..{last_delta}")
            offset = base_offset + off_delta
            if whole or start <= offset < end:
                add_offset(offset)
                add_ts(base_ts + ts_delta if append_time is None else append_time)
                add_key(key)
                add_value(value)
                add_headers(hdrs)
    except IndexError:
        raise RecordBatchError("truncated record") from None
    if pos != n:
        raise RecordBatchError(f"{n - pos} bytes after the last of {header.record_count} records")
    out.offsets += offsets
    out.timestamps += timestamps
    out.keys += keys
    out.values += values
    out.headers += headers


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 (the caller undoes zig-zag). At most 10 bytes."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise RecordBatchError("varint longer than 10 bytes")


def _zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def _headers(buf: bytes, pos: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, pos = _zigzag(buf, pos)
    if count < 0 or count > len(buf) - pos:
        raise RecordBatchError(f"bad header count {count}")
    items: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = _zigzag(buf, pos)
        if klen < 0:
            raise RecordBatchError("null header key")
        key = buf[pos : pos + klen].decode("utf-8", "replace")
        pos += klen
        vlen, pos = _zigzag(buf, pos)
        if vlen < 0:
            items.append((key, None))
        else:
            items.append((key, buf[pos : pos + vlen]))
            pos += vlen
    return tuple(items), pos
