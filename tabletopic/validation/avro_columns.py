"""Does each of a column of Avro datums decode with one writer schema? Checked for all at once.

Every datum of the column has the same schema, so the schema is walked once and each step moves
a NumPy array of read positions (one per datum) forward: a ``long`` skips a varint in every datum,
a ``string`` reads every datum's length and jumps it, a union splits the rows by branch, an array
loops over blocks while any datum still has items. A datum is valid when every step found what its
type allows (boolean 0/1, enum and union indexes in range, non-negative lengths, varints of at most
10 bytes) and the walk ends exactly at the datum's end, so a short datum or garbage after a valid
prefix is caught. This is about a hundred times cheaper per record than building the rows: it never
creates a value, only positions.

Strings must be UTF-8: their spans are collected during the walk and checked together at the end
(all-ASCII, the common case, in one NumPy comparison; the rest decoded one by one). Recursive
schemas (a named type used inside itself) are not compiled: :func:`compile_validator` returns None
and the caller decodes per record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]
# Which rows a step works on: an index array, or ``_ALL`` (a slice: every row as a view, which
# spares a gather and a scatter per step in the common case of a record without unions).
Rows = Ints | slice
_ALL = slice(None)
# A step: (data, positions of all rows, end of each row, bad, rows to advance) -> None. It moves
# ``pos[rows]`` past one value and sets ``bad[rows]`` where the value is invalid.
Step = Callable[[Bytes, Ints, Ints, npt.NDArray[np.bool_], Rows], None]

_MAX_DEPTH = 32
_TEN = np.arange(10, dtype=np.int64)


class Unsupported(Exception):
    """The schema has a shape this module does not walk (recursive named types)."""


def compile_validator(expanded_schema: Any) -> Callable[[Bytes, Ints, Ints], npt.NDArray[np.bool_]] | None:
    """A function ``(data, starts, ends) -> bad`` for datums of ``expanded_schema`` (fastavro's
    expanded form) lying at ``data[starts[i]:ends[i]]``; ``data`` must have 16 bytes of padding
    after the last datum. None when the schema cannot be walked here."""
    strings: list[tuple[Ints, Ints, Ints]] = []
    try:
        step = _compile(expanded_schema, 0, _string_step(strings))
    except Unsupported:
        return None

    def validate(data: Bytes, starts: Ints, ends: Ints) -> npt.NDArray[np.bool_]:
        pos = starts.astype(np.int64, copy=True)
        bad = np.zeros(len(starts), dtype=np.bool_)
        strings.clear()
        try:
            step(data, pos, ends, bad, _ALL)
            bad |= pos != ends
            _check_utf8(data, strings, bad)
        finally:
            strings.clear()
        return bad

    return validate


def _string_step(strings: list[tuple[Ints, Ints, Ints]]) -> Step:
    """A ``string`` step that also notes (rows, starts, lengths) of the strings it skips."""

    def step(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
        length = _read_long(data, pos, ends, bad, rows)
        _mark(bad, rows, length < 0)
        begin = pos[rows].copy()  # a view when rows is _ALL, and pos moves below
        length = np.maximum(length, 0)
        _advance(pos, ends, rows, begin + length)
        fits = begin + length <= ends[rows]
        strings.append((_pick(rows, fits), begin[fits], length[fits]))

    return step


def _check_utf8(data: Bytes, strings: list[tuple[Ints, Ints, Ints]], bad: npt.NDArray[np.bool_]) -> None:
    if not strings:
        return
    rows = np.concatenate([r for r, _, _ in strings])
    starts = np.concatenate([s for _, s, _ in strings])
    lengths = np.concatenate([n for _, _, n in strings])
    keep = lengths > 0
    rows, starts, lengths = rows[keep], starts[keep], lengths[keep]
    total = int(lengths.sum())
    if not total:
        return
    offsets = np.cumsum(lengths) - lengths
    gathered = data[np.repeat(starts - offsets, lengths) + np.arange(total, dtype=np.int64)]
    high = gathered >= 0x80
    if not high.any():
        return
    suspects = np.flatnonzero(np.add.reduceat(high, offsets) > 0)
    raw = data.tobytes()
    for i in suspects.tolist():
        start = int(starts[i])
        try:
            raw[start : start + int(lengths[i])].decode("utf-8")
        except UnicodeDecodeError:
            bad[rows[i]] = True


def _pick(rows: Rows, mask: npt.NDArray[np.bool_]) -> Ints:
    """The rows (as indexes) where ``mask``, ``mask`` being aligned with ``rows``."""
    return np.flatnonzero(mask) if isinstance(rows, slice) else rows[mask]


def _mark(bad: npt.NDArray[np.bool_], rows: Rows, mask: npt.NDArray[np.bool_]) -> None:
    """Mark bad the rows where ``mask`` (aligned with ``rows``)."""
    if isinstance(rows, slice):
        bad |= mask
    else:
        bad[rows[mask]] = True


def _read_long(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> Ints:
    """The zig-zag varint at ``pos[rows]`` (advancing past it); >10 bytes marks the row bad."""
    at = pos[rows]
    limit = len(data) - 1
    b = data[np.minimum(at, limit)].astype(np.uint64)
    value = b & np.uint64(0x7F)
    size = np.ones(len(at), dtype=np.int64)
    more = b >= 0x80
    k = 1
    while more.any():
        if k == 10:
            _mark(bad, rows, more)
            break
        b = data[np.minimum(at + k, limit)].astype(np.uint64)
        value |= np.where(more, (b & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        size += more
        more &= b >= 0x80
        k += 1
    _advance(pos, ends, rows, at + size)
    signed = (value >> np.uint64(1)) ^ (np.uint64(0) - (value & np.uint64(1)))
    return signed.view(np.int64)


def _advance(pos: Ints, ends: Ints, rows: Rows, to: Ints) -> None:
    # Never further than one past the datum's end: reads stay inside the padded buffer, and a
    # datum that ran over is caught by the final position check.
    pos[rows] = np.minimum(to, ends[rows] + 1)


def _fixed(size: int) -> Step:
    def step(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
        _advance(pos, ends, rows, pos[rows] + size)

    return step


def _nothing(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
    return None


def _boolean(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
    at = pos[rows]
    bad[rows] |= data[np.minimum(at, len(data) - 1)] > 1
    _advance(pos, ends, rows, at + 1)


def _varint(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
    """Skip an int or long: its value is never needed, so the ten bytes a varint may span are
    looked at in one gather and its size is where the first byte without the high bit is (a few
    operations whatever the length, where reading a value loops once per byte)."""
    at = pos[rows]
    window = data[np.minimum(at[:, None] + _TEN, len(data) - 1)]
    stops = window < 0x80
    _mark(bad, rows, ~stops.any(axis=1))
    _advance(pos, ends, rows, at + stops.argmax(axis=1) + 1)


def _length_prefixed(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
    length = _read_long(data, pos, ends, bad, rows)
    negative = length < 0
    _mark(bad, rows, negative)
    _advance(pos, ends, rows, pos[rows] + np.maximum(length, 0))


def _enum(symbols: int) -> Step:
    def step(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
        index = _read_long(data, pos, ends, bad, rows)
        _mark(bad, rows, (index < 0) | (index >= symbols))

    return step


def _union(branches: list[Step]) -> Step:
    def step(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
        index = _read_long(data, pos, ends, bad, rows)
        _mark(bad, rows, (index < 0) | (index >= len(branches)))
        for number, branch in enumerate(branches):
            chosen = _pick(rows, index == number)
            if len(chosen):
                branch(data, pos, ends, bad, chosen)

    return step


def _record(fields: list[Step]) -> Step:
    def step(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
        for field in fields:
            field(data, pos, ends, bad, rows)

    return step


def _blocks(items: list[Step]) -> Step:
    """Arrays (one item step) and maps (a string key step, then the value step): blocks of
    ``count`` items (a negative count is followed by the block's byte size) until a count of 0."""
    # Every item but an array of nulls takes at least one byte: a count beyond the bytes left is
    # garbage (and would loop for ever).
    zero_width = items == [_nothing]

    def step(data: Bytes, pos: Ints, ends: Ints, bad: npt.NDArray[np.bool_], rows: Rows) -> None:
        active = np.arange(len(pos), dtype=np.int64) if isinstance(rows, slice) else rows
        while len(active):
            count = _read_long(data, pos, ends, bad, active)
            sized = count < 0
            if sized.any():
                _read_long(data, pos, ends, bad, active[sized])
                count = np.abs(count)
            room = ends[active] - pos[active]
            impossible = (room < 0) | (count > (1 << 20) if zero_width else count > room)
            bad[active[impossible]] = True
            keep = (count > 0) & ~impossible
            active, count = active[keep], count[keep]
            block, left = active, count
            while len(block):
                for item in items:
                    item(data, pos, ends, bad, block)
                left = left - 1
                over = pos[block] > ends[block]
                bad[block[over]] = True
                more = (left > 0) & ~over
                block, left = block[more], left[more]
            active = active[pos[active] <= ends[active]]

    return step


_PRIMITIVES: dict[str, Step] = {
    "null": _nothing,
    "boolean": _boolean,
    "int": _varint,
    "long": _varint,
    "float": _fixed(4),
    "double": _fixed(8),
    "bytes": _length_prefixed,
    "string": _length_prefixed,
}


def _compile(schema: Any, depth: int, string: Step) -> Step:
    if depth > _MAX_DEPTH:
        raise Unsupported("schema nested too deeply")
    if isinstance(schema, list):
        return _union([_compile(branch, depth + 1, string) for branch in schema])
    if isinstance(schema, str):
        if schema == "string":
            return string
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        raise Unsupported(f"named type {schema} used inside itself")
    if not isinstance(schema, dict):
        raise Unsupported(f"schema node {schema!r}")
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return _compile(kind, depth + 1, string)
    if kind == "string":
        return string
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "record" or kind == "error":
        return _record([_compile(field["type"], depth + 1, string) for field in schema["fields"]])
    if kind == "enum":
        return _enum(len(schema["symbols"]))
    if kind == "fixed":
        return _fixed(int(schema["size"]))
    if kind == "array":
        return _blocks([_compile(schema["items"], depth + 1, string)])
    if kind == "map":
        return _blocks([string, _compile(schema["values"], depth + 1, string)])
    if isinstance(kind, str):
        raise Unsupported(f"named type {kind} used inside itself")
    raise Unsupported(f"schema node {schema!r}")
