"""Avro values to Arrow: the type mapping and a batch decoder built on fastavro.

Type mapping (what Iceberg can hold, following Iceberg's own Avro conversion where it has one):

- unions with null -> the other branch, nullable; ``["null", A, B]`` and ``[A, B]`` -> a struct with
  one nullable field per branch, named ``member0``, ``member1``… (spark-avro's convention)
- enum -> string; fixed -> fixed_size_binary; bytes -> binary; map -> map<string, …>; array -> list
- decimal -> decimal128(p, s); date -> date32; time-millis/micros -> time64(us);
  timestamp-millis/micros/nanos -> timestamp(us, UTC); local-timestamp-* -> timestamp(us); uuid -> string

Speed: fastavro's Cython reader turns temporal logical types into ``datetime`` objects, which costs
more than the decoding itself. We hand fastavro a copy of the schema with those logical types
stripped, receive plain ints, build the array with a matching Arrow read type (``timestamp('ms')``
from ints is free) and cast the whole array to the table type at once.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa

from tabletopic.table.convert.arrowutil import apply_fixup, values_to_array

_STRIPPED_LOGICAL = {
    "timestamp-millis", "timestamp-micros", "timestamp-nanos", "local-timestamp-millis",
    "local-timestamp-micros", "local-timestamp-nanos", "time-millis", "time-micros", "date", "uuid",
}  # fmt: skip

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
class _Mapped:
    read: pa.DataType
    final: pa.DataType
    fixup: Callable[[Any], Any] | None = None


def parse_avro_schema(text: str, references: Sequence[tuple[str, str]] = ()) -> Any:
    """Parse registry schema text (plus referenced schemas) into a fully expanded fastavro schema."""
    named: dict[str, Any] = {}
    for _, ref_text in references:
        fastavro.parse_schema(json.loads(ref_text), named_schemas=named)
    return fastavro.parse_schema(json.loads(text), named_schemas=named, expand=True)


def avro_to_arrow_type(schema: Any) -> pa.DataType:
    """The Arrow (table) type of an expanded Avro schema."""
    return _map(schema, ()).final


class AvroDecoder:
    """Decodes schemaless Avro payloads (no wire-format header) into one Arrow array.

    Built once per writer schema and cached by schema id: parsing the schema and deriving the
    types is far more expensive than decoding a record.
    """

    def __init__(
        self,
        text: str,
        references: Sequence[tuple[str, str]] = (),
        columnar: bool = True,
        native: bool = False,
    ) -> None:
        expanded = parse_avro_schema(text, references)
        mapped = _map(expanded, ())
        self.arrow_type: pa.DataType = mapped.final
        self._read_type = mapped.read
        self._fixup = mapped.fixup
        self._reader_schema = fastavro.parse_schema(_strip_logical(copy.deepcopy(expanded)))
        self.is_record = isinstance(expanded, dict) and expanded.get("type") == "record"
        from tabletopic.table.convert.avro_columnar import compile_decoder

        # The generated columnar decoder is ~2x faster where it applies; fastavro covers the rest.
        self._columnar = compile_decoder(expanded) if columnar else None
        if self._columnar is not None and self._columnar.arrow_type != self.arrow_type:
            self._columnar = None  # a mapping mismatch would be a bug; never risk wrong types
        from tabletopic.table.convert.native_avro import compile_native

        # Whole columns in native code (~15x); the decoders above take what it hands back.
        self._native = compile_native(expanded, self.arrow_type) if native else None

    def decode(
        self, payloads: Sequence[bytes | None], skip: int = 0, column: pa.BinaryArray | None = None
    ) -> tuple[pa.Array, dict[int, str]]:
        """Decode each payload from byte ``skip`` on (None stays null). Returns the array and
        ``{index: reason}`` for payloads that are not valid Avro for this schema (null rows)."""
        if self._native is not None:
            array = self._native.decode(payloads, skip, column)
            if array is not None:
                return array, {}
        if self._columnar is not None:
            return self._columnar.decode(payloads, skip)
        reader = fastavro.schemaless_reader
        schema = self._reader_schema
        values: list[Any] = []
        append = values.append
        failures: dict[int, str] = {}
        bytes_io = io.BytesIO
        for i, payload in enumerate(payloads):
            if payload is None:
                append(None)
                continue
            stream = bytes_io(payload)
            if skip:
                stream.seek(skip)
            try:
                value = reader(stream, schema, None)
            except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError…
                failures[i] = f"invalid Avro: {type(exc).__name__}: {exc}"
                append(None)
                continue
            if stream.tell() != len(payload):
                failures[i] = f"invalid Avro: {len(payload) - stream.tell()} bytes left after the record"
                append(None)
                continue
            append(value)
        apply_fixup(values, self._fixup, failures)
        return values_to_array(values, self._read_type, self.arrow_type, failures), failures


def _strip_logical(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("logicalType") in _STRIPPED_LOGICAL:
            node = {k: v for k, v in node.items() if k != "logicalType"}
        return {k: _strip_logical(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_strip_logical(v) for v in node]
    return node


def _map(schema: Any, seen: tuple[str, ...]) -> _Mapped:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            t = _PRIMITIVES[schema]
            return _Mapped(t, t)
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
            m = _map(f["type"], (*seen, name))
            fields.append(pa.field(f["name"], m.final, nullable=True))
            read_fields.append(pa.field(f["name"], m.read, nullable=True))
            if m.fixup is not None:
                fixups[f["name"]] = m.fixup
        fix = _record_fixup(fixups) if fixups else None
        return _Mapped(pa.struct(read_fields), pa.struct(fields), fix)
    if kind == "enum":
        return _Mapped(pa.string(), pa.string())
    if kind == "fixed":
        t = pa.binary(schema["size"])
        return _Mapped(t, t)
    if kind == "array":
        m = _map(schema["items"], seen)
        fix = (lambda v, f=m.fixup: [None if x is None else f(x) for x in v]) if m.fixup else None
        return _Mapped(pa.list_(m.read), pa.list_(m.final), fix)
    if kind == "map":
        m = _map(schema["values"], seen)
        fix = (
            (lambda v, f=m.fixup: {k: None if x is None else f(x) for k, x in v.items()}) if m.fixup else None
        )
        return _Mapped(pa.map_(pa.string(), m.read), pa.map_(pa.string(), m.final), fix)
    if kind in _PRIMITIVES:
        return _map(kind, seen)
    raise AvroSchemaError(f"unsupported Avro type {kind!r}")


def _logical(schema: dict[str, Any], kind: str, logical: str) -> _Mapped | None:
    """Logical types; an unknown or misapplied one falls back to the underlying type (Avro's rule)."""
    utc = "UTC"
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = int(schema.get("precision", 0))
        scale = int(schema.get("scale", 0))
        if 0 < precision <= 38:
            t = pa.decimal128(precision, scale)
            return _Mapped(t, t)
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
    return None if types is None else _Mapped(*types)


def _record_fixup(fixups: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def fix(value: dict[str, Any]) -> dict[str, Any]:
        for name, f in fixups.items():
            item = value.get(name)
            if item is not None:
                value[name] = f(item)
        return value

    return fix


def _union(branches: list[Any], seen: tuple[str, ...]) -> _Mapped:
    non_null = [b for b in branches if b != "null"]
    if not non_null:
        return _Mapped(pa.null(), pa.null())
    if len(non_null) == 1:
        m = _map(non_null[0], seen)
        return _Mapped(m.read, m.final, m.fixup)
    mapped = [_map(b, seen) for b in non_null]
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

    return _Mapped(read, final, fix)


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
