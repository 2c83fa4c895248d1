"""JSON Schema -> Arrow mapping used by the table pipeline."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from tabletopic.schema_registry.formats.jsonschema import FORMAT
from tabletopic.table.convert.jsonschema_arrow import json_schema_to_arrow


def arrow(schema: Any, references: dict[str, Any] | None = None) -> pa.Schema:
    refs = {k: json.dumps(v) for k, v in (references or {}).items()}
    return json_schema_to_arrow(FORMAT.parse(json.dumps(schema), refs))


def test_object_properties_become_columns_with_nullability_from_required() -> None:
    schema = arrow(
        {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "price": {"type": "number"},
                "ok": {"type": "boolean"},
                "name": {"type": "string"},
                "note": {"type": ["string", "null"]},
            },
            "required": ["id", "name", "note"],
        }
    )
    assert schema == pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("price", pa.float64()),
            pa.field("ok", pa.bool_()),
            pa.field("name", pa.string(), nullable=False),
            pa.field("note", pa.string()),
        ]
    )


def test_string_formats_map_to_temporal_types() -> None:
    schema = arrow(
        {
            "properties": {
                "d": {"type": "string", "format": "date"},
                "ts": {"type": "string", "format": "date-time"},
                "t": {"type": "string", "format": "time"},
                "u": {"type": "string", "format": "uuid"},
            }
        }
    )
    assert schema.field("d").type == pa.date32()
    assert schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert schema.field("t").type == pa.time64("us")
    assert schema.field("u").type == pa.string()


def test_nested_objects_arrays_and_maps() -> None:
    schema = arrow(
        {
            "type": "object",
            "properties": {
                "address": {
                    "type": "object",
                    "properties": {"zip": {"type": "string"}},
                    "required": ["zip"],
                },
                "tags": {"type": "array", "items": {"type": "string"}},
                "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
        }
    )
    assert schema.field("address").type == pa.struct([pa.field("zip", pa.string(), nullable=False)])
    assert schema.field("tags").type == pa.list_(pa.field("element", pa.string(), nullable=False))
    assert schema.field("attrs").type == pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))


def test_refs_are_resolved_locally_and_across_references() -> None:
    schema = arrow(
        {
            "$defs": {"money": {"type": "number"}},
            "properties": {"total": {"$ref": "#/$defs/money"}, "ship_to": {"$ref": "address.json"}},
        },
        {"address.json": {"type": "object", "properties": {"zip": {"type": "string"}}}},
    )
    assert schema.field("total").type == pa.float64()
    assert schema.field("ship_to").type == pa.struct([pa.field("zip", pa.string())])


def test_recursive_refs_fall_back_to_json_text() -> None:
    schema = arrow({"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#"}}})
    assert schema.field("next").type == pa.string()


def test_nullable_unions_and_mixed_unions() -> None:
    schema = arrow(
        {
            "properties": {
                "maybe": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                "num": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
                "mixed": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                "multi": {"type": ["integer", "string"]},
            },
            "required": ["maybe", "num"],
        }
    )
    assert schema.field("maybe").type == pa.int64() and schema.field("maybe").nullable
    assert schema.field("num").type == pa.float64() and not schema.field("num").nullable
    assert schema.field("mixed").type == pa.string()
    assert schema.field("multi").type == pa.string()


def test_all_of_is_merged_into_one_struct() -> None:
    schema = arrow(
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]},
            ]
        }
    )
    assert schema.names == ["a", "b"]
    assert not schema.field("b").nullable


def test_non_object_root_becomes_a_single_value_column() -> None:
    assert arrow({"type": "string"}) == pa.schema([pa.field("value", pa.string(), nullable=False)])
    assert arrow({"type": "array", "items": {"type": "integer"}}).names == ["value"]


def test_enum_without_type_uses_the_type_of_its_values() -> None:
    schema = arrow({"properties": {"color": {"enum": ["red", "green"]}}})
    assert schema.field("color").type == pa.string()
