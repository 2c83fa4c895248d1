"""What the native (whole-column) decoders share: a column of payloads with tombstones (None) is
decoded as the array of the payloads that are present, and the result is spread back to one row per
payload with nulls where the tombstones were. Keeping that in one place keeps every native decoder's
output aligned with the per-record path row for row."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa


def present_values(
    payloads: Sequence[bytes | None], column: pa.BinaryArray | None = None
) -> tuple[Sequence[int], pa.BinaryArray]:
    """The indexes of the payloads that are not None, and those payloads as one binary array.
    ``column`` is the same payloads already as Arrow (built by the prefix check): reused when it
    has no nulls, so the common case builds neither an index list nor a new array."""
    if column is not None and not column.null_count:
        return range(len(payloads)), column
    present = [i for i, p in enumerate(payloads) if p is not None]
    values = payloads if len(present) == len(payloads) else [payloads[i] for i in present]
    return present, pa.array(values, pa.binary())


def spread(array: pa.Array, present: Sequence[int], count: int) -> pa.Array:
    """``array`` (one row per present payload) as ``count`` rows: row ``present[j]`` is
    ``array[j]``, every other row null."""
    if len(present) == count:
        return array
    where: list[int | None] = [None] * count
    for j, i in enumerate(present):
        where[i] = j
    return array.take(pa.array(where, pa.int64()))
