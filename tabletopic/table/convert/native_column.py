"""What the native (whole-column) decoders share: a column of payloads with tombstones (None) is
decoded as the array of the payloads that are present, and the result is spread back to one row per
payload with nulls where the tombstones were. Keeping that in one place keeps every native decoder's
output aligned with the per-record path row for row."""

from __future__ import annotations

import importlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Protocol

import pyarrow as pa

log = logging.getLogger(__name__)


def importable(module: str) -> bool:
    """Whether ``module`` (a native decoder's engine, a pinned dependency) imports here: slim
    installs may lack it, and the decoders then decode per record."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


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


def decode_column(
    payloads: Sequence[bytes | None],
    skip: int,
    column: pa.BinaryArray | None,
    minimum: int,
    decode_binary: Callable[[pa.BinaryArray, int], pa.Array],
    what: str,
) -> pa.Array | None:
    """The steps every native decoder takes around its own ``decode_binary``: the present payloads
    (fewer than ``minimum``: None, the per-record path is as fast), decoded from byte ``skip`` on,
    spread back to one row per payload; None when ``decode_binary`` raises (a corrupt payload or a
    shape it cannot give exactly: the per-record path finds which). ``what`` names the payloads in
    the log line."""
    present, binary = present_values(payloads, column)
    if len(present) < minimum:
        return None
    try:
        array = decode_binary(binary, skip)
    except Exception as exc:
        log.debug("native decode of %d %s failed (%s); decoding per record", len(binary), what, exc)
        return None
    return spread(array, present, len(payloads))


class NativeColumn(Protocol):
    def decode(
        self, payloads: Sequence[bytes | None], skip: int = 0, column: pa.BinaryArray | None = None
    ) -> pa.Array | None:
        """The column decoded whole, or None when it has to be decoded per record."""


class NativeFirstDecoder(ABC):
    """A value decoder that decodes a column natively when it has a native decoder and the column
    takes it, and per record otherwise (the JSON and Protobuf decoders; Avro has a columnar step
    between the two)."""

    _native: NativeColumn | None = None

    def decode(
        self, payloads: Sequence[bytes | None], skip: int = 0, column: pa.BinaryArray | None = None
    ) -> tuple[pa.Array, dict[int, str]]:
        if self._native is not None:
            array = self._native.decode(payloads, skip, column)
            if array is not None:
                return array, {}
        return self.decode_per_record(payloads, skip)

    @abstractmethod
    def decode_per_record(
        self, payloads: Sequence[bytes | None], skip: int = 0
    ) -> tuple[pa.Array, dict[int, str]]:
        """One array entry per payload, decoded one at a time: slow, but it isolates each bad
        record (failures as ``{index: reason}``)."""
