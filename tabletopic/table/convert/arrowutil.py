"""Turning decoded Python values into Arrow arrays without letting one bad value sink a batch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa


def values_to_array(
    values: list[Any],
    read_type: pa.DataType,
    final_type: pa.DataType,
    failures: dict[int, str],
) -> pa.Array:
    """Build an array of ``final_type`` from ``values`` (None at already-failed positions).

    ``read_type`` is what the decoder's Python values map onto directly (for instance
    ``timestamp('ms')`` from Avro's int timestamps); the result is cast to ``final_type`` in one
    vectorised step. When Arrow rejects the batch, values are converted one by one and the culprits
    are added to ``failures`` (and nulled) — the slow path runs only for batches with bad data.
    """
    try:
        return _build(values, read_type, final_type)
    except _ERRORS:
        pass
    for i, value in enumerate(values):
        if value is None:
            continue
        try:
            _build([value], read_type, final_type)
        except _ERRORS as exc:
            failures[i] = f"value does not fit the schema: {exc}"
            values[i] = None
    try:
        return _build(values, read_type, final_type)
    except _ERRORS as exc:
        # Values that pass one by one but not together (should not happen): fail them all rather
        # than the task.
        for i, value in enumerate(values):
            if value is not None:
                failures[i] = f"values do not fit the schema together: {exc}"
        return pa.nulls(len(values), type=final_type)


_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)


def _build(values: list[Any], read_type: pa.DataType, final_type: pa.DataType) -> pa.Array:
    array = pa.array(values, type=read_type)
    if read_type != final_type:
        # Unsafe so Avro nanosecond timestamps truncate to micros; unparseable text still raises.
        array = array.cast(final_type, safe=False)
    return array


def apply_fixup(values: list[Any], fixup: Callable[[Any], Any] | None, failures: dict[int, str]) -> None:
    """Run a per-value adjustment in place, recording values it rejects."""
    if fixup is None:
        return
    for i, value in enumerate(values):
        if value is None:
            continue
        try:
            values[i] = fixup(value)
        except (TypeError, ValueError, KeyError) as exc:
            failures[i] = f"cannot convert value: {exc}"
            values[i] = None


def decode_each(
    payloads: Sequence[bytes | None],
    skip: int,
    decode_one: Callable[[bytes], Any],
    errors: tuple[type[Exception], ...],
    describe: Callable[[Exception], str],
) -> tuple[list[Any], dict[int, str]]:
    """The decoders' per-record path: each payload from byte ``skip`` on through ``decode_one``
    (None stays null); one raising ``errors`` is null, with ``describe(exc)`` as its failure.
    Slow, but it isolates each bad record."""
    values: list[Any] = []
    failures: dict[int, str] = {}
    for i, payload in enumerate(payloads):
        if payload is None:
            values.append(None)
            continue
        try:
            values.append(decode_one(payload[skip:] if skip else payload))
        except errors as exc:
            failures[i] = describe(exc)
            values.append(None)
    return values, failures
