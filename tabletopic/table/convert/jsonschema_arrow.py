"""Map a JSON Schema to an Arrow schema, for the table pipeline that writes Iceberg tables.

Rules: objects with ``properties`` become structs; objects with only ``additionalProperties`` a
map from string; arrays lists; ``integer`` int64; ``number`` float64; string formats ``date``,
``date-time`` and ``time`` become date32, timestamp(us, UTC) and time64(us). A field is nullable
unless it is required and its type excludes ``null``.

Anything a columnar type cannot express — several non-null types, branches of different shapes,
a recursive ``$ref`` — becomes a string column holding the JSON text, so no record is ever refused
at the table for its shape.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tabletopic.schema_registry.formats.jsonschema.keywords import (
    enum_values,
    json_type_of,
    merge_schemas,
)
from tabletopic.schema_registry.formats.jsonschema.schema import (
    ParsedJsonSchema,
    Resolver,
    dereference,
    enter,
    ref_of,
)

# Column name used when the root schema is not an object.
VALUE_COLUMN = "value"
JSON_TEXT = pa.string()
_FORMATS: dict[str, pa.DataType] = {
    "date": pa.date32(),
    "date-time": pa.timestamp("us", tz="UTC"),
    "time": pa.time64("us"),
    "uuid": pa.string(),
}


def json_schema_to_arrow(parsed: ParsedJsonSchema) -> pa.Schema:
    """The Arrow schema of the records ``parsed`` describes.

    A root object maps to one column per property; any other root to a single ``value`` column.
    """
    mapper = _Mapper(parsed)
    schema, resolver = mapper.resolve(parsed.schema, parsed.root_resolver())
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        mapper.active.add(id(schema))
        struct = mapper.to_arrow(schema, resolver)
        if pa.types.is_struct(struct):
            return pa.schema(list(struct))
    data_type, nullable = mapper.field_type(parsed.schema, parsed.root_resolver())
    return pa.schema([pa.field(VALUE_COLUMN, data_type, nullable=nullable)])


class _Mapper:
    def __init__(self, parsed: ParsedJsonSchema) -> None:
        self.parsed = parsed
        self.active: set[int] = set()

    def resolve(self, schema: Any, resolver: Resolver) -> tuple[Any, Resolver]:
        for _ in range(64):
            if ref_of(schema) is None:
                break
            schema, resolver = dereference(schema, resolver, self.parsed.dialect)
        schema = self._flatten(schema, resolver)
        return schema, enter(schema, resolver, self.parsed.dialect)

    def _flatten(self, schema: Any, resolver: Resolver) -> Any:
        if not (isinstance(schema, dict) and isinstance(schema.get("allOf"), list)):
            return schema
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for branch in schema["allOf"]:
            target, _ = self.resolve(branch, resolver)
            if isinstance(target, dict):
                merged = merge_schemas(merged, target)
        return merged

    def field_type(self, schema: Any, resolver: Resolver) -> tuple[pa.DataType, bool]:
        """(Arrow type, whether the schema admits ``null``)."""
        schema, resolver = self.resolve(schema, resolver)
        if not isinstance(schema, dict):
            return JSON_TEXT, True
        if id(schema) in self.active:
            return JSON_TEXT, True  # recursive type: Arrow has no recursive columns
        self.active.add(id(schema))
        try:
            return self._field_type(schema, resolver)
        finally:
            self.active.discard(id(schema))

    def _field_type(self, schema: dict[str, Any], resolver: Resolver) -> tuple[pa.DataType, bool]:
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                return self._union(branches, resolver)
        types = _types(schema)
        nullable = "null" in types or not types
        concrete = [t for t in types if t != "null"]
        if "integer" in concrete and "number" in concrete:
            concrete.remove("integer")
        if len(concrete) != 1:
            return JSON_TEXT, True
        return self._scalar(concrete[0], schema, resolver), nullable

    def _union(self, branches: list[Any], resolver: Resolver) -> tuple[pa.DataType, bool]:
        nullable = False
        found: list[pa.DataType] = []
        for branch in branches:
            target, tres = self.resolve(branch, resolver)
            if isinstance(target, dict) and _types(target) == ["null"]:
                nullable = True
                continue
            data_type, branch_nullable = self.field_type(target, tres)
            nullable = nullable or branch_nullable
            if data_type not in found:
                found.append(data_type)
        if len(found) == 1:
            return found[0], nullable
        if {str(t) for t in found} <= {"int64", "double"}:
            return pa.float64(), nullable
        return JSON_TEXT, True

    def _scalar(self, name: str, schema: dict[str, Any], resolver: Resolver) -> pa.DataType:
        if name == "integer":
            return pa.int64()
        if name == "number":
            return pa.float64()
        if name == "boolean":
            return pa.bool_()
        if name == "string":
            fmt = schema.get("format")
            if isinstance(fmt, str) and fmt in _FORMATS:
                return _FORMATS[fmt]
            if schema.get("contentEncoding") == "base64":
                return pa.binary()
            return pa.string()
        if name == "array":
            return self._array(schema, resolver)
        if name == "object":
            return self.to_arrow(schema, resolver)
        return JSON_TEXT

    def _array(self, schema: dict[str, Any], resolver: Resolver) -> pa.DataType:
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if isinstance(items, list) or isinstance(prefix, list):
            return JSON_TEXT  # tuples have per-position types, which a list column cannot hold
        if not isinstance(items, dict):
            return pa.list_(JSON_TEXT)
        item_type, item_nullable = self.field_type(items, resolver)
        return pa.list_(pa.field("element", item_type, nullable=item_nullable))

    def to_arrow(self, schema: dict[str, Any], resolver: Resolver) -> pa.DataType:
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            required = (
                set(schema.get("required") or []) if isinstance(schema.get("required"), list) else set()
            )
            fields = []
            for name, sub in properties.items():
                data_type, admits_null = self.field_type(sub, resolver)
                fields.append(pa.field(name, data_type, nullable=admits_null or name not in required))
            return pa.struct(fields)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            value_type, value_nullable = self.field_type(extra, resolver)
            return pa.map_(pa.string(), pa.field("value", value_type, nullable=value_nullable))
        return JSON_TEXT


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    values = enum_values(schema)
    if values is not None:
        return sorted({json_type_of(v) for v in values})
    if isinstance(schema.get("properties"), dict):
        return ["object"]
    if "items" in schema or "prefixItems" in schema:
        return ["array"]
    return []
