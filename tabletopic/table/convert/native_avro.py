"""Avro datums -> Arrow in native code: a whole column of datums at once instead of one at a time.

DataFusion's Avro reader (Rust, ``arrow-avro``) decodes an Avro object container file column by
column, about 15x faster than fastavro per record. A Kafka column of datums written with one schema
is that file's body minus the framing, so the datums are wrapped as one in-memory container block
(header with the writer schema, null codec, one block of ``count`` datums, sync marker) and read in
one call. DataFusion reads only from a path, so the block goes through a file in ``/dev/shm``
(memory) when the machine has one.

DataFusion does not check that a block's datums end where the block does: a datum a few bytes short
shifts every later one and can decode as plausible rows (seen here with a truncated datum). So each
datum is followed by a guard: the wrapped schema is the record plus a trailing ``fixed(8)`` field
that every datum is given the same 8 bytes for. A datum that is short or long makes its guard read
land on other bytes, the guard column then differs from the constant, and the block is decoded per
record instead: a misparse is caught unless 8 wrong bytes equal the guard by chance.

The result is reshaped to exactly the type the per-record decoder produces
(:attr:`AvroDecoder.arrow_type`): enums arrive dictionary-encoded, timestamps in their own unit,
multi-branch unions as dense unions (-> the ``member0``… struct), and fields marked not-null. A shape
this module cannot reshape exactly (``uuid`` arrives as 16 raw bytes, for one) makes :func:`compile`
return None for the schema and the caller keeps the per-record decoder. Any error while decoding a
block (a corrupt datum, a short read, a datum count that does not match) returns None too: the
caller then decodes that block per record, which isolates the bad records for ``errors.tolerance``.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Sequence
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.records.encoder import zigzag
from tabletopic.table.convert.native_column import decode_column, importable

# Below this many datums the per-record decoder is as fast (DataFusion costs ~1 ms per call).
MIN_NATIVE_DATUMS = 256
_SYNC = bytes(range(16))
_GUARD_FIELD = "__tabletopic_guard"
_GUARD = b"\xa5\x5a\xc3\x3c\x96\x69\x0f\xf0"


class _Unsupported(Exception):
    """The native reader's output cannot be reshaped to the per-record type exactly."""


def _header(schema_json: str) -> bytes:
    meta = {b"avro.schema": schema_json.encode(), b"avro.codec": b"null"}
    out = bytearray(b"Obj\x01")
    out += zigzag(len(meta))
    for key, value in meta.items():
        out += zigzag(len(key)) + key + zigzag(len(value)) + value
    out += zigzag(0) + _SYNC
    return bytes(out)


@cache
def _context() -> Any:
    """One DataFusion context per process, one partition: a Spark task is one core's work."""
    import datafusion

    config = datafusion.SessionConfig().with_target_partitions(1)
    return datafusion.SessionContext(config)


@cache
def available() -> bool:
    return importable("datafusion")


def warm(rows: int = MIN_NATIVE_DATUMS) -> int:
    """Decode a column of ``rows`` datums of a 20-field record once, so the DataFusion context and
    its Avro reader are set up (about a second the first time in a process) before a real chunk
    needs them; with ``rows`` near a chunk's (an ingest task's workers), the reader's first large
    read is paid here too: the first 500 k-row decode of a process costs about twice the later
    ones. Returns how many datums were decoded natively (0: DataFusion missing or it failed)."""
    if not available():
        return 0
    from tabletopic.table.convert.avro_types import avro_to_arrow_type

    kinds = ("long", "int", "double", "string", "boolean")
    fields = [{"name": f"f{i}", "type": kinds[i % len(kinds)]} for i in range(20)]
    schema = {"type": "record", "name": "Warm", "fields": fields}
    variants = []
    for v in range(64):
        datum = bytearray()
        for i, f in enumerate(fields):
            kind = f["type"]
            if kind in ("long", "int"):
                datum += zigzag((v * 7919 + i) << (24 if kind == "long" else 8))
            elif kind == "double":
                datum += struct.pack("<d", v / 7 + i)
            elif kind == "string":
                text = b"w" * (4 + (v * 5 + i) % 28)
                datum += zigzag(len(text)) + text
            else:
                datum.append((v + i) & 1)
        variants.append(bytes(datum))
    column = pa.array(variants * max(rows // len(variants), 4), pa.binary())
    # The same target type the per-record decoder gives (AvroDecoder.arrow_type), as in a real job.
    decoded = NativeAvroColumn(schema, avro_to_arrow_type(schema)).decode([None] * len(column), 0, column)
    return 0 if decoded is None else len(decoded)


def _scratch_dir() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _contains_uuid(schema: Any) -> bool:
    if isinstance(schema, dict):
        if schema.get("logicalType") == "uuid":
            return True
        return any(_contains_uuid(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_contains_uuid(v) for v in schema)
    return False


class NativeAvroColumn:
    """Decodes a column of datums of one writer schema with DataFusion, to ``target``."""

    def __init__(self, expanded_schema: Any, target: pa.DataType) -> None:
        guarded = {
            **expanded_schema,
            "fields": [
                *expanded_schema["fields"],
                {"name": _GUARD_FIELD, "type": {"type": "fixed", "name": "TabletopicGuard", "size": 8}},
            ],
        }
        self._header = _header(json.dumps(guarded))
        self._target = target

    def decode(
        self, payloads: Sequence[bytes | None], skip: int = 0, column: pa.BinaryArray | None = None
    ) -> pa.Array | None:
        """The column as ``target`` (null where a payload is None), or None when it has to be
        decoded per record (any decode error, or a shape that does not reshape exactly)."""
        return decode_column(payloads, skip, column, MIN_NATIVE_DATUMS, self.decode_binary, "Avro datums")

    def decode_binary(self, binary: pa.BinaryArray, skip: int = 0) -> pa.Array:
        """Every datum of ``binary`` (no nulls) from byte ``skip`` on as ``target``; raises on any
        error (a corrupt datum, a misaligned read, a shape that does not reshape exactly)."""
        if skip:
            binary = pc.binary_slice(binary, skip, (1 << 31) - 1)
        binary = pc.binary_join_element_wise(binary, pa.scalar(_GUARD, pa.binary()), b"")
        # The datums back to back are the data buffer between the first and last offsets.
        offsets_buffer, data = binary.buffers()[1:3]
        bounds = pa.Array.from_buffers(
            pa.int32(), len(binary) + 1, [None, offsets_buffer], offset=binary.offset
        )
        start, end = bounds[0].as_py(), bounds[-1].as_py()
        body = memoryview(data)[start:end] if data is not None else memoryview(b"")
        block = b"".join((self._header, zigzag(len(binary)), zigzag(end - start), body, _SYNC))
        table = self._read(block)
        guard = table.column(_GUARD_FIELD)
        if table.num_rows != len(binary) or not pc.all(pc.equal(guard, _GUARD)).as_py():
            raise ValueError(f"{table.num_rows} rows misaligned with {len(binary)} datums")
        return reshape(table.drop_columns([_GUARD_FIELD]).to_struct_array().combine_chunks(), self._target)

    def _read(self, block: bytes) -> pa.Table:
        with tempfile.NamedTemporaryFile(suffix=".avro", dir=_scratch_dir()) as scratch:
            scratch.write(block)
            scratch.flush()
            return _context().read_avro(scratch.name).to_arrow_table()


def compile_native(expanded_schema: Any, target: pa.DataType) -> NativeAvroColumn | None:
    """A native decoder for ``expanded_schema`` (references inlined) whose output is ``target``,
    or None when DataFusion is missing or the schema has a shape it cannot give exactly."""
    if not available() or not isinstance(expanded_schema, dict) or expanded_schema.get("type") != "record":
        return None
    if _contains_uuid(expanded_schema):
        return None
    return NativeAvroColumn(expanded_schema, target)


def reshape(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as exactly ``target``. Raises :class:`_Unsupported` for a shape it cannot map."""
    source = array.type
    if source == target:
        return array
    if pa.types.is_dictionary(source):
        return reshape(array.dictionary_decode(), target)
    if pa.types.is_union(source):
        return _union(array, target)
    if pa.types.is_struct(target):
        if not pa.types.is_struct(source):
            raise _Unsupported(f"{source} -> {target}")
        children = []
        for f in target:
            if source.get_field_index(f.name) < 0:
                raise _Unsupported(f"field {f.name} missing in {source}")
            children.append(reshape(array.field(f.name), f.type))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target):
        if not pa.types.is_map(source):
            raise _Unsupported(f"{source} -> {target}")
        keys = reshape(array.keys, target.key_type)
        items = reshape(array.items, target.item_type)
        mask = array.is_null() if array.null_count else None
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=mask)
    if pa.types.is_list(target):
        if not pa.types.is_list(source):
            raise _Unsupported(f"{source} -> {target}")
        values = reshape(array.values, target.value_type)
        mask = array.is_null() if array.null_count else None
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=mask)
    textual = pa.types.is_string(target) or pa.types.is_large_string(target)
    if textual and not (pa.types.is_string(source) or pa.types.is_large_string(source)):
        raise _Unsupported(f"{source} -> {target}")
    if pa.types.is_nested(source):
        raise _Unsupported(f"{source} -> {target}")
    try:
        return array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Unsupported(f"{source} -> {target}: {exc}") from exc


def _union(array: pa.UnionArray, target: pa.DataType) -> pa.Array:
    """A dense union -> the per-record mapping: the single non-null branch itself, or a struct with
    one field per non-null branch (``member0``…), set where the value was written with it."""
    source = array.type
    codes = pc.cast(array.type_codes, pa.int32())
    offsets = array.offsets if source.mode == "dense" else None
    branches = [(source.type_codes[i], source.field(i)) for i in range(source.num_fields)]
    null_codes = [code for code, f in branches if pa.types.is_null(f.type)]
    values = [(code, i) for i, (code, f) in enumerate(branches) if not pa.types.is_null(f.type)]
    is_null = pc.is_in(codes, pa.array(null_codes, pa.int32())) if null_codes else None

    def branch(code: int, index: int, kind: pa.DataType) -> pa.Array:
        hit = pc.equal(codes, code)
        child = array.field(index)
        positions = offsets if offsets is not None else pa.array(range(len(array)), pa.int32())
        picked = child.take(pc.if_else(hit, positions, pa.scalar(None, positions.type)))
        return reshape(picked, kind)

    if not pa.types.is_struct(target) or len(values) == 1:
        if len(values) != 1:
            raise _Unsupported(f"{source} -> {target}")
        code, index = values[0]
        return branch(code, index, target)
    if target.num_fields != len(values):
        raise _Unsupported(f"{source} -> {target}")
    children = [branch(code, index, target.field(k).type) for k, (code, index) in enumerate(values)]
    return pa.StructArray.from_arrays(children, fields=list(target), mask=is_null)
