"""Where each record's key and value lie in a records block, as NumPy columns.

For a check that looks at whole columns of keys or values (broker-side schema validation), building
a Python object per record is most of the cost. Here the only per-record Python work is following
the record lengths from one record to the next (a sequential chain no vectorisation can skip);
every field inside a record is then read for all records at once with NumPy.

A record is ``length, attributes, timestampDelta, offsetDelta, keyLength, key, valueLength, value,
headers`` (zig-zag varints; a length of -1 is null). Headers are not read: a record's end comes
from its length, and a key or value running past it makes the block invalid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tabletopic.records.columns import read_uvarint
from tabletopic.records.errors import RecordBatchError

Ints = npt.NDArray[np.int64]
_PAD = 16  # zero bytes after the block: a varint read past a record's end stays in bounds
FEW = 16  # up to this many records, they are read one by one (no NumPy)
# "Size of the length varint + the length" for every one- and two-byte zig-zag length.
_ONE_BYTE = tuple(1 + ((v >> 1) ^ -(v & 1)) for v in range(1 << 7))
_TWO_BYTES = tuple(2 + ((v >> 1) ^ -(v & 1)) for v in range(1 << 14))


@dataclass(frozen=True, slots=True)
class RecordSpans:
    """Per record (in batch order): where its key and value start in ``data`` and their lengths
    (-1: null). ``data`` is the records block followed by padding zeros."""

    data: npt.NDArray[np.uint8]
    raw: bytes  # the records block itself (payloads are sliced from it)
    key_start: Ints
    key_length: Ints
    value_start: Ints
    value_length: Ints

    def __len__(self) -> int:
        return len(self.value_start)

    def starts(self, is_key: bool) -> Ints:
        return self.key_start if is_key else self.value_start

    def lengths(self, is_key: bool) -> Ints:
        return self.key_length if is_key else self.value_length


def record_spans(block: bytes | memoryview, count: int) -> RecordSpans:
    """The key and value spans of the ``count`` records of a decompressed records block.

    Raises:
        RecordBatchError: the block does not hold exactly ``count`` well-formed records.
    """
    buf = bytes(block)
    if count <= FEW:
        return _few_spans(buf, count)
    return _many_spans(buf, count)


def _many_spans(buf: bytes, count: int) -> RecordSpans:
    n = len(buf)
    # The chain of record lengths, in Python: only where each record begins is kept (its length is
    # read again below for all records at once). Lengths of one and two bytes (records up to 8 KiB)
    # come from tables of "varint size + length": a lookup costs less than the arithmetic.
    begins: list[int] = []
    add = begins.append
    one, two = _ONE_BYTE, _TWO_BYTES
    pos = 0
    try:
        for _ in range(count):
            add(pos)
            b = buf[pos]
            if b < 0x80:
                pos += one[b]
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    pos += two[(b & 0x7F) | (c << 7)]
                else:
                    length, after = read_uvarint(buf, pos)
                    pos = after + ((length >> 1) ^ -(length & 1))
    except IndexError:
        raise RecordBatchError("truncated record") from None
    if pos != n:
        raise RecordBatchError(
            f"{n - pos} bytes after the last of {count} records" if pos < n else "truncated record"
        )
    data = np.frombuffer(buf + bytes(_PAD), dtype=np.uint8)
    lengths, start = _read_zigzag(data, np.array(begins, dtype=np.int64))
    end = start + lengths
    if count and bool((lengths < 6).any()):
        raise RecordBatchError(f"record {int(np.argmax(lengths < 6))} is shorter than a record can be")
    at = start + 1  # attributes
    at = _skip_varint(data, at)  # timestampDelta
    at = _skip_varint(data, at)  # offsetDelta
    key_length, at = _read_zigzag(data, at)
    key_start = at
    at = at + np.maximum(key_length, 0)
    value_length, value_start = _read_zigzag(data, np.minimum(at, n))
    value_end = value_start + np.maximum(value_length, 0)
    if count and (
        bool((value_end > end).any()) or bool((key_length < -1).any()) or bool((value_length < -1).any())
    ):
        bad = int(np.argmax((value_end > end) | (key_length < -1) | (value_length < -1)))
        raise RecordBatchError(f"record {bad}: key or value runs past the record")
    return RecordSpans(data, buf, key_start, key_length, value_start, value_length)


def _few_spans(buf: bytes, count: int) -> RecordSpans:
    """The same spans read record by record: for a handful of records the fixed cost of a NumPy
    call, some thirty of them above, is most of the work."""
    n = len(buf)
    key_starts: list[int] = []
    key_lengths: list[int] = []
    value_starts: list[int] = []
    value_lengths: list[int] = []
    pos = 0
    try:
        for index in range(count):
            length, at = _zigzag(buf, pos)
            end = at + length
            if length < 6:
                raise RecordBatchError(f"record {index} is shorter than a record can be")
            if end > n:
                raise RecordBatchError("truncated record")
            _, at = read_uvarint(buf, at + 1)  # attributes, timestampDelta
            _, at = read_uvarint(buf, at)  # offsetDelta
            key_length, at = _zigzag(buf, at)
            key_start = at
            value_length, value_start = _zigzag(buf, at + max(key_length, 0))
            if key_length < -1 or value_length < -1 or value_start + max(value_length, 0) > end:
                raise RecordBatchError(f"record {index}: key or value runs past the record")
            key_starts.append(key_start)
            key_lengths.append(key_length)
            value_starts.append(value_start)
            value_lengths.append(value_length)
            pos = end
    except IndexError:
        raise RecordBatchError("truncated record") from None
    if pos != n:
        raise RecordBatchError(f"{n - pos} bytes after the last of {count} records")
    data = np.frombuffer(buf + bytes(_PAD), dtype=np.uint8)
    columns = (key_starts, key_lengths, value_starts, value_lengths)
    return RecordSpans(data, buf, *(np.array(c, dtype=np.int64) for c in columns))


def _zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    value, after = read_uvarint(buf, pos)
    return (value >> 1) ^ -(value & 1), after


def _skip_varint(data: npt.NDArray[np.uint8], at: Ints) -> Ints:
    """Positions just past the varint at each of ``at``."""
    size = np.ones_like(at)
    more = data[at] >= 0x80
    k = 1
    while more.any():
        if k == 10:
            raise RecordBatchError("varint longer than 10 bytes")
        size += more
        more &= data[np.minimum(at + k, len(data) - 1)] >= 0x80
        k += 1
    return at + size


def _read_zigzag(data: npt.NDArray[np.uint8], at: Ints) -> tuple[Ints, Ints]:
    """The zig-zag varint32 at each of ``at`` (lengths), and the positions after them."""
    b = data[at].astype(np.int64)
    value = b & 0x7F
    size = np.ones_like(at)
    more = b >= 0x80
    k = 1
    while more.any():
        if k == 5:
            raise RecordBatchError("length varint longer than 5 bytes")
        b = data[np.minimum(at + k, len(data) - 1)].astype(np.int64)
        value |= np.where(more, (b & 0x7F) << (7 * k), 0)
        size += more
        more &= b >= 0x80
        k += 1
    return (value >> 1) ^ -(value & 1), at + size
