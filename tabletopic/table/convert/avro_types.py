"""Avro schemas to Arrow types: the mapping every Avro decoder of the table pipeline shares (the
fastavro-based one in :mod:`~tabletopic.table.convert.avro`, the generated columnar one and the
native one), kept apart from them so none has to import another for it.

See :mod:`~tabletopic.table.convert.avro` for the mapping itself. A mapped type has two forms: the
``read`` type a decoder builds the array with (temporal values as plain ints) and the ``final``
table type it is cast to at once, with a ``fixup`` for values that need one on the way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


class AvroSchemaError(ValueError):
    """The Avro schema cannot be represented as an Iceberg table (e.g. a recursive record)."""


@dataclass(frozen=True, slots=True)
class MappedType:
    read: pa.DataType
    final: pa.DataType
    fixup: Callable[[Any], Any] | None = None


def avro_to_arrow_type(schema: Any) -> pa.DataType:
    """The Arrow (table) type of an expanded Avro schema."""
    return map_avro_type(schema, ()).final


def map_avro_type(schema: Any, seen: tuple[str, ...]) -> MappedType:
    """The read and final Arrow types of an expanded Avro schema; ``seen`` names the records
    being mapped (a recursive record cannot be a table)."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            t = _PRIMITIVES[schema]
            return MappedType(t, t)
        raise AvroSchemaError(f"unresolved Avro type name {schema!r} (recursive types are not supported)")
    if isinstance(schema, list):
        return _union(schema, seen)
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical is not None:
        mapped = _logical(schema, kind, logical)
        if mapped is not None:
            return mapped
    if kind == "record":
        name = schema.get("name", "")
        if name in seen:
            raise AvroSchemaError(f"recursive Avro record {name!r} cannot become a table column")
        fields = []
        read_fields = []
        fixups: dict[str, Callable[[Any], Any]] = {}
        for f in schema["fields"]:
            m = map_avro_type(f["type"], (*seen, name))
            fields.append(pa.field(f["name"], m.final, nullable=True))
            read_fields.append(pa.field(f["name"], m.read, nullable=True))
            if m.fixup is not None:
                fixups[f["name"]] = m.fixup
        fix = _record_fixup(fixups) if fixups else None
        return MappedType(pa.struct(read_fields), pa.struct(fields), fix)
    if kind == "enum":
        return MappedType(pa.string(), pa.string())
    if kind == "fixed":
        t = pa.binary(schema["size"])
        return MappedType(t, t)
    if kind == "array":
        m = map_avro_type(schema["items"], seen)
        fix = (lambda v, f=m.fixup: [None if x is None else f(x) for x in v]) if m.fixup else None
        return MappedType(pa.list_(m.read), pa.list_(m.final), fix)
    if kind == "map":
        m = map_avro_type(schema["values"], seen)
        fix = (
            (lambda v, f=m.fixup: {k: None if x is None else f(x) for k, x in v.items()}) if m.fixup else None
        )
        return MappedType(pa.map_(pa.string(), m.read), pa.map_(pa.string(), m.final), fix)
    if kind in _PRIMITIVES:
        return map_avro_type(kind, seen)
    raise AvroSchemaError(f"unsupported Avro type {kind!r}")


def _logical(schema: dict[str, Any], kind: str, logical: str) -> MappedType | None:
    """Logical types; an unknown or misapplied one falls back to the underlying type (Avro's rule)."""
    utc = "UTC"
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = int(schema.get("precision", 0))
        scale = int(schema.get("scale", 0))
        if 0 < precision <= 38:
            t = pa.decimal128(precision, scale)
            return MappedType(t, t)
        return None
    table: dict[tuple[str, str], tuple[pa.DataType, pa.DataType]] = {
        ("int", "date"): (pa.date32(), pa.date32()),
        ("int", "time-millis"): (pa.time32("ms"), pa.time64("us")),
        ("long", "time-micros"): (pa.time64("us"), pa.time64("us")),
        ("long", "timestamp-millis"): (pa.timestamp("ms", utc), pa.timestamp("us", utc)),
        ("long", "timestamp-micros"): (pa.timestamp("us", utc), pa.timestamp("us", utc)),
        ("long", "timestamp-nanos"): (pa.timestamp("ns", utc), pa.timestamp("us", utc)),
        ("long", "local-timestamp-millis"): (pa.timestamp("ms"), pa.timestamp("us")),
        ("long", "local-timestamp-micros"): (pa.timestamp("us"), pa.timestamp("us")),
        ("long", "local-timestamp-nanos"): (pa.timestamp("ns"), pa.timestamp("us")),
        ("string", "uuid"): (pa.string(), pa.string()),
    }
    types = table.get((kind, logical))
    return None if types is None else MappedType(*types)


def _record_fixup(fixups: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def fix(value: dict[str, Any]) -> dict[str, Any]:
        for name, f in fixups.items():
            item = value.get(name)
            if item is not None:
                value[name] = f(item)
        return value

    return fix


def _union(branches: list[Any], seen: tuple[str, ...]) -> MappedType:
    non_null = [b for b in branches if b != "null"]
    if not non_null:
        return MappedType(pa.null(), pa.null())
    if len(non_null) == 1:
        m = map_avro_type(non_null[0], seen)
        return MappedType(m.read, m.final, m.fixup)
    mapped = [map_avro_type(b, seen) for b in non_null]
    names = [f"member{i}" for i in range(len(non_null))]
    read = pa.struct([pa.field(n, m.read) for n, m in zip(names, mapped, strict=True)])
    final = pa.struct([pa.field(n, m.final) for n, m in zip(names, mapped, strict=True)])
    matchers = [_branch_matcher(b) for b in non_null]
    fixups = [m.fixup for m in mapped]

    def fix(value: Any) -> dict[str, Any]:
        # fastavro returns the bare value; find the branch it was written with by its Python type
        # (the first matching branch in declaration order, as Avro's own resolution does).
        for name, matches, f in zip(names, matchers, fixups, strict=True):
            if matches(value):
                return {name: f(value) if f is not None else value}
        raise ValueError(f"value {value!r} matches no union branch")

    return MappedType(read, final, fix)


def _branch_matcher(branch: Any) -> Callable[[Any], bool]:
    kind = branch if isinstance(branch, str) else branch.get("type")
    if isinstance(branch, dict) and branch.get("logicalType") == "decimal":
        import decimal

        return lambda v: isinstance(v, decimal.Decimal)
    if kind == "boolean":
        return lambda v: isinstance(v, bool)
    if kind in ("int", "long"):
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if kind in ("float", "double"):
        return lambda v: isinstance(v, float)
    if kind == "string":
        return lambda v: isinstance(v, str)
    if kind == "enum":
        symbols = set(branch["symbols"])
        return lambda v: isinstance(v, str) and v in symbols
    if kind == "bytes":
        return lambda v: isinstance(v, bytes)
    if kind == "fixed":
        size = branch["size"]
        return lambda v: isinstance(v, bytes) and len(v) == size
    if kind == "array":
        return lambda v: isinstance(v, list)
    if kind == "map":
        return lambda v: isinstance(v, dict)
    if kind == "record":
        names = {f["name"] for f in branch["fields"]}
        return lambda v: isinstance(v, dict) and set(v) == names
    return lambda v: False
