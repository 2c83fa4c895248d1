"""One Arrow schema for rows written with several schema versions.

A batch read from a topic may hold records of versions 1, 2 and 3 of a subject. They become one
Iceberg write, so their Arrow schemas are merged: the union of fields (by name, nested structs too,
first-seen order), every field nullable, and types widened only the ways Iceberg can evolve a column
(int -> long, float -> double, decimal precision up at the same scale). Anything else raises
:class:`SchemaConflict` — the caller treats the minority rows as failures or fails the commit.

Types are compared as the Iceberg column they become, not as Arrow spells them: ``string``,
``large_string`` and ``string_view`` are all an Iceberg ``string`` (likewise the binaries and the
lists), and nullability is not part of a type. Rows of one batch reach here in different spellings
as a matter of course — the decoders give ``string``, pyiceberg's Arrow view of a table gives
``large_string``, and tombstone deletes are cast to the table's view — so calling two spellings a
conflict failed a whole commit over rows that fit one column (an upsert cycle holding an update
and a tombstone went FAILED). Mixed spellings unify to the large one, which holds both.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa


class SchemaConflict(TypeError):
    """Two versions give one column types that no Iceberg column can hold both of."""


def unify_schemas(schemas: Sequence[pa.Schema]) -> pa.Schema:
    """Merge schemas as described in the module docstring. Raises SchemaConflict naming the column."""
    if not schemas:
        return pa.schema([])
    merged = pa.struct(list(schemas[0]))
    for schema in schemas[1:]:
        merged = unify_types(merged, pa.struct(list(schema)), "")
    return pa.schema([merged.field(i) for i in range(merged.num_fields)])


def unify_types(a: pa.DataType, b: pa.DataType, path: str = "") -> pa.DataType:
    """The narrowest type both ``a`` and ``b`` values fit in losslessly (see module docstring)."""
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        fields: dict[str, pa.Field] = {}
        for f in list(a) + list(b):
            existing = fields.get(f.name)
            if existing is None:
                fields[f.name] = f.with_nullable(True)
            else:
                child = unify_types(existing.type, f.type, f"{path}.{f.name}" if path else f.name)
                fields[f.name] = pa.field(f.name, child, nullable=True)
        return pa.struct(list(fields.values()))
    if _is_list(a) and _is_list(b):
        element = unify_types(a.value_type, b.value_type, f"{path}.element")
        return pa.list_(element) if pa.types.is_list(a) and pa.types.is_list(b) else pa.large_list(element)
    if pa.types.is_map(a) and pa.types.is_map(b):
        return pa.map_(
            unify_types(a.key_type, b.key_type, f"{path}.key"),
            unify_types(a.item_type, b.item_type, f"{path}.value"),
        )
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        return pa.int64() if max(a.bit_width, b.bit_width) > 32 else pa.int32()
    if pa.types.is_floating(a) and pa.types.is_floating(b):
        return pa.float64()
    if pa.types.is_decimal(a) and pa.types.is_decimal(b) and a.scale == b.scale:
        return pa.decimal128(max(a.precision, b.precision), a.scale)
    if _is_string(a) and _is_string(b):
        return pa.large_string()
    if _is_binary(a) and _is_binary(b):
        return pa.large_binary()
    raise SchemaConflict(f"column {path or '<value>'} is {a} in one schema version and {b} in another")


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t))


def _is_list(t: pa.DataType) -> bool:
    """A variable-size list in any offset width (views are cast like scalars, see conform_array)."""
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def conform_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Reshape ``array`` to ``target`` (a unified type): missing struct fields become nulls, nested
    types are rebuilt field by field, scalars are cast (widening only, so the cast is safe)."""
    if array.type == target:
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), type=target)
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = []
        names = {array.type.field(i).name for i in range(array.type.num_fields)}
        for i in range(target.num_fields):
            f = target.field(i)
            if f.name in names:
                children.append(conform_array(array.field(f.name), f.type))
            else:
                children.append(pa.nulls(len(array), type=f.type))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if _is_list(target) and _is_list(array.type):
        values = conform_array(array.flatten(), target.value_type)
        offsets = array.offsets
        if array.null_count:
            offsets = _null_offsets(array)
        # Rebuilt in the array's own offset width, then cast if the target's differs (list <->
        # large_list is a cast of the offsets only).
        large = pa.types.is_large_list(array.type)
        kind = (pa.large_list if large else pa.list_)(target.value_field)
        rebuilt = (pa.LargeListArray if large else pa.ListArray).from_arrays(offsets, values, type=kind)
        return rebuilt if rebuilt.type == target else rebuilt.cast(target)
    if pa.types.is_map(target) and pa.types.is_map(array.type):
        keys = conform_array(array.keys, target.key_type)
        items = conform_array(array.items, target.item_type)
        offsets = array.offsets
        if array.null_count:
            offsets = _null_offsets(array)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target)
    return array.cast(target)


def _null_offsets(array: pa.Array) -> pa.Array:
    """List offsets with nulls where the list is null (``from_arrays`` reads validity from them)."""
    offsets = array.offsets.to_pylist()
    valid = array.is_valid().to_pylist()
    return pa.array(
        [*(offsets[i] if valid[i] else None for i in range(len(array))), offsets[-1]], array.offsets.type
    )


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s columns, in its order (missing ones null)."""
    columns = []
    for f in schema:
        index = batch.schema.get_field_index(f.name)
        if index < 0:
            columns.append(pa.nulls(batch.num_rows, type=f.type))
        else:
            columns.append(conform_array(batch.column(index), f.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
