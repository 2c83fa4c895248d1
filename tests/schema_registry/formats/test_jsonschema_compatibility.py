"""JSON Schema compatibility rules, checked in both directions.

Each case gives an old and a new schema and the incompatibility kinds expected when the new schema
reads data written with the old one (BACKWARD) and when the old one reads the new one's (FORWARD).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tabletopic.schema_registry.formats.base import Incompatibility
from tabletopic.schema_registry.formats.jsonschema import FORMAT, ParsedJsonSchema

DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"


def obj(properties: dict[str, Any], **keywords: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **keywords}


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
NUMBER = {"type": "number"}

# (id, old, new, kinds when new reads old, kinds when old reads new)
CASES: list[tuple[str, Any, Any, set[str], set[str]]] = [
    ("identical", obj({"a": STRING}), obj({"a": STRING}), set(), set()),
    (
        "property added to open model",
        obj({"a": STRING}),
        obj({"a": STRING, "b": INTEGER}),
        {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"},
        set(),
    ),
    (
        "optional property added to closed model",
        obj({"a": STRING}, additionalProperties=False),
        obj({"a": STRING, "b": INTEGER}, additionalProperties=False),
        set(),
        {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"},
    ),
    (
        "required property added to closed model",
        obj({"a": STRING}, additionalProperties=False),
        obj({"a": STRING, "b": INTEGER}, additionalProperties=False, required=["b"]),
        {"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"},
        {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"},
    ),
    (
        "required attribute added",
        obj({"a": STRING, "b": INTEGER}),
        obj({"a": STRING, "b": INTEGER}, required=["b"]),
        {"REQUIRED_ATTRIBUTE_ADDED"},
        set(),
    ),
    (
        "required attribute with default added",
        obj({"a": STRING, "b": INTEGER}),
        obj({"a": STRING, "b": {"type": "integer", "default": 0}}, required=["b"]),
        set(),
        set(),
    ),
    (
        "property removed from open model",
        obj({"a": STRING, "b": INTEGER}),
        obj({"a": STRING}),
        set(),
        {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"},
    ),
    (
        "content model closed",
        obj({"a": STRING}),
        obj({"a": STRING}, additionalProperties=False),
        {"ADDITIONAL_PROPERTIES_REMOVED"},
        set(),
    ),
    (
        "additional properties narrowed",
        obj({}, additionalProperties=NUMBER),
        obj({}, additionalProperties=INTEGER),
        {"ADDITIONAL_PROPERTIES_NARROWED"},
        set(),
    ),
    (
        "property covered by partially open model",
        obj({"a": STRING}, additionalProperties=STRING),
        obj({"a": STRING, "b": STRING}, additionalProperties=STRING),
        set(),
        set(),
    ),
    (
        "property not covered by partially open model",
        obj({"a": STRING}, additionalProperties=STRING),
        obj({"a": STRING, "b": INTEGER}, additionalProperties=STRING),
        {"PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"},
        {"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"},
    ),
    (
        "property covered by pattern properties",
        obj({}, patternProperties={"^x_": STRING}, additionalProperties=False),
        obj({"x_a": STRING}, patternProperties={"^x_": STRING}, additionalProperties=False),
        set(),
        set(),
    ),
    ("number narrowed to integer", NUMBER, INTEGER, {"TYPE_NARROWED"}, set()),
    ("string changed to integer", STRING, INTEGER, {"TYPE_CHANGED"}, {"TYPE_CHANGED"}),
    ("null dropped from type list", {"type": ["string", "null"]}, STRING, {"TYPE_NARROWED"}, set()),
    ("type list reordered", {"type": ["string", "null"]}, {"type": ["null", "string"]}, set(), set()),
    ("type added where none was", {}, STRING, {"TYPE_NARROWED"}, set()),
    ("enum extended", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, set(), {"ENUM_ARRAY_NARROWED"}),
    ("enum replaced", {"enum": ["a", "b"]}, {"enum": ["c"]}, {"ENUM_ARRAY_CHANGED"}, {"ENUM_ARRAY_CHANGED"}),
    ("enum added to a string", STRING, {"type": "string", "enum": ["a"]}, {"ENUM_ARRAY_NARROWED"}, set()),
    ("const added", STRING, {"const": "a"}, {"ENUM_ARRAY_NARROWED"}, set()),
    ("enum covering every boolean", {"type": "boolean"}, {"enum": [True, False]}, set(), set()),
    (
        "enum values checked against constraints",
        {"enum": ["ab", "cd"]},
        {"type": "string", "maxLength": 2},
        set(),
        {"ENUM_ARRAY_NARROWED"},
    ),
    (
        "enum values rejected by constraints",
        {"enum": ["ab", "abc"]},
        {"type": "string", "maxLength": 2},
        {"ENUM_VALUE_REJECTED"},
        {"ENUM_ARRAY_NARROWED"},
    ),
    (
        "max length decreased",
        {"type": "string", "maxLength": 10},
        {"type": "string", "maxLength": 5},
        {"MAX_LENGTH_DECREASED"},
        set(),
    ),
    ("max length added", STRING, {"type": "string", "maxLength": 5}, {"MAX_LENGTH_ADDED"}, set()),
    (
        "min length increased",
        {"type": "string", "minLength": 1},
        {"type": "string", "minLength": 3},
        {"MIN_LENGTH_INCREASED"},
        set(),
    ),
    ("pattern added", STRING, {"type": "string", "pattern": "^a"}, {"PATTERN_ADDED"}, set()),
    (
        "pattern changed",
        {"type": "string", "pattern": "^a"},
        {"type": "string", "pattern": "^b"},
        {"PATTERN_CHANGED"},
        {"PATTERN_CHANGED"},
    ),
    (
        "string constraints ignored for other types",
        {"type": "integer"},
        {"type": "integer", "maxLength": 1},
        set(),
        set(),
    ),
    (
        "minimum increased",
        {"type": "number", "minimum": 0},
        {"type": "number", "minimum": 5},
        {"MINIMUM_INCREASED"},
        set(),
    ),
    ("minimum added", NUMBER, {"type": "number", "minimum": 0}, {"MINIMUM_ADDED"}, set()),
    (
        "maximum decreased",
        {"type": "number", "maximum": 10},
        {"type": "number", "maximum": 5},
        {"MAXIMUM_DECREASED"},
        set(),
    ),
    (
        "maximum made exclusive",
        {"type": "number", "maximum": 10},
        {"type": "number", "exclusiveMaximum": 10},
        {"EXCLUSIVE_MAXIMUM_DECREASED"},
        set(),
    ),
    (
        "exclusive minimum added",
        NUMBER,
        {"type": "number", "exclusiveMinimum": 0},
        {"EXCLUSIVE_MINIMUM_ADDED"},
        set(),
    ),
    (
        "draft 4 boolean exclusive minimum",
        {"$schema": DRAFT4, "type": "number", "minimum": 0},
        {"$schema": DRAFT4, "type": "number", "minimum": 0, "exclusiveMinimum": True},
        {"EXCLUSIVE_MINIMUM_INCREASED"},
        set(),
    ),
    (
        "multiple of expanded",
        {"type": "integer", "multipleOf": 2},
        {"type": "integer", "multipleOf": 4},
        {"MULTIPLE_OF_EXPANDED"},
        set(),
    ),
    (
        "multiple of changed",
        {"type": "integer", "multipleOf": 2},
        {"type": "integer", "multipleOf": 3},
        {"MULTIPLE_OF_CHANGED"},
        {"MULTIPLE_OF_CHANGED"},
    ),
    ("multiple of added", NUMBER, {"type": "number", "multipleOf": 0.5}, {"MULTIPLE_OF_ADDED"}, set()),
    ("multiple of one on integers", INTEGER, {"type": "integer", "multipleOf": 1}, set(), set()),
    (
        "decimal multiple of reduced",
        {"type": "number", "multipleOf": 0.2},
        {"type": "number", "multipleOf": 0.1},
        set(),
        {"MULTIPLE_OF_EXPANDED"},
    ),
    (
        "array items narrowed",
        {"type": "array", "items": NUMBER},
        {"type": "array", "items": INTEGER},
        {"TYPE_NARROWED"},
        set(),
    ),
    (
        "max items decreased",
        {"type": "array", "maxItems": 5},
        {"type": "array", "maxItems": 2},
        {"MAX_ITEMS_DECREASED"},
        set(),
    ),
    ("min items added", {"type": "array"}, {"type": "array", "minItems": 1}, {"MIN_ITEMS_ADDED"}, set()),
    (
        "unique items added",
        {"type": "array"},
        {"type": "array", "uniqueItems": True},
        {"UNIQUE_ITEMS_ADDED"},
        set(),
    ),
    (
        "tuple item added to open model",
        {"type": "array", "items": [STRING]},
        {"type": "array", "items": [STRING, INTEGER]},
        {"ITEM_ADDED_TO_OPEN_CONTENT_MODEL"},
        set(),
    ),
    (
        "tuple item added to closed model",
        {"type": "array", "items": [STRING], "additionalItems": False},
        {"type": "array", "items": [STRING, INTEGER], "additionalItems": False},
        set(),
        {"ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"},
    ),
    (
        "additional items removed",
        {"type": "array", "items": [STRING]},
        {"type": "array", "items": [STRING], "additionalItems": False},
        {"ADDITIONAL_ITEMS_REMOVED"},
        set(),
    ),
    (
        "2020-12 prefix items changed",
        {"$schema": DRAFT2020, "prefixItems": [NUMBER], "items": False},
        {"$schema": DRAFT2020, "prefixItems": [INTEGER], "items": False},
        {"TYPE_NARROWED"},
        set(),
    ),
    ("sum type narrowed", {"oneOf": [STRING, INTEGER]}, {"oneOf": [STRING]}, {"SUM_TYPE_NARROWED"}, set()),
    (
        "sum branch changed",
        {"anyOf": [STRING, INTEGER]},
        {"anyOf": [STRING, {"type": "boolean"}]},
        {"COMBINED_TYPE_SUBSCHEMAS_CHANGED"},
        {"COMBINED_TYPE_SUBSCHEMAS_CHANGED"},
    ),
    ("sum branches reordered", {"oneOf": [STRING, INTEGER]}, {"oneOf": [INTEGER, STRING]}, set(), set()),
    ("plain type extended to a sum", STRING, {"anyOf": [STRING, {"type": "null"}]}, set(), {"TYPE_CHANGED"}),
    (
        "type list read by a sum",
        {"type": ["string", "null"]},
        {"anyOf": [STRING, {"type": "null"}]},
        set(),
        set(),
    ),
    ("oneOf changed to anyOf", {"oneOf": [STRING, INTEGER]}, {"anyOf": [STRING, INTEGER]}, set(), set()),
    (
        "product type extended",
        {"allOf": [obj({"a": STRING})]},
        {"allOf": [obj({"a": STRING}), {"required": ["a"]}]},
        {"REQUIRED_ATTRIBUTE_ADDED"},
        set(),
    ),
    (
        "allOf merged on the writer side",
        {"allOf": [obj({"a": STRING}), {"required": ["a"]}]},
        obj({"a": STRING}, required=["a"]),
        set(),
        set(),
    ),
    ("not added", STRING, {"type": "string", "not": {"enum": ["x"]}}, {"NOT_TYPE_EXTENDED"}, set()),
    ("not with a disjoint type", STRING, {"type": "string", "not": {"type": "null"}}, set(), set()),
    ("not narrowed", {"not": {"type": ["string", "null"]}}, {"not": STRING}, set(), {"NOT_TYPE_EXTENDED"}),
    (
        "dependency array added",
        obj({"a": STRING, "b": STRING}),
        obj({"a": STRING, "b": STRING}, dependencies={"a": ["b"]}),
        {"DEPENDENCY_ARRAY_ADDED"},
        set(),
    ),
    (
        "max properties decreased",
        {"type": "object", "maxProperties": 5},
        {"type": "object", "maxProperties": 3},
        {"MAX_PROPERTIES_DECREASED"},
        set(),
    ),
    ("reader accepts nothing", STRING, False, {"SCHEMA_REMOVED"}, set()),
    ("writer writes nothing", False, STRING, set(), {"SCHEMA_REMOVED"}),
    ("empty schema reads anything", STRING, {}, set(), {"TYPE_NARROWED"}),
]


def parse(schema: Any, references: dict[str, Any] | None = None) -> ParsedJsonSchema:
    refs = {name: json.dumps(value) for name, value in (references or {}).items()}
    return FORMAT.parse(json.dumps(schema), refs)


def kinds(found: list[Incompatibility]) -> set[str]:
    return {i.kind for i in found}


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_compatibility_rule_in_both_directions(
    old: Any, new: Any, backward: set[str], forward: set[str]
) -> None:
    old_schema, new_schema = parse(old), parse(new)
    assert kinds(FORMAT.reader_can_read(new_schema, old_schema)) == backward
    assert kinds(FORMAT.reader_can_read(old_schema, new_schema)) == forward


def test_incompatibility_location_points_into_nested_objects() -> None:
    old = obj({"address": obj({"zip": {"type": "string", "maxLength": 10}})})
    new = obj({"address": obj({"zip": {"type": "string", "maxLength": 5}})})
    [found] = FORMAT.reader_can_read(parse(new), parse(old))
    assert found.kind == "MAX_LENGTH_DECREASED"
    assert found.location == "#/properties/address/properties/zip/maxLength"
    assert "10" in found.message and "5" in found.message


def test_property_names_with_slashes_are_escaped_in_locations() -> None:
    [found] = FORMAT.reader_can_read(parse(obj({"a/b": INTEGER})), parse(obj({"a/b": NUMBER})))
    assert found.location == "#/properties/a~1b/type"


def test_refs_are_followed_on_both_sides() -> None:
    def schema(max_length: int) -> dict[str, Any]:
        return {
            "definitions": {"address": obj({"zip": {"type": "string", "maxLength": max_length}})},
            **obj({"home": {"$ref": "#/definitions/address"}}),
        }

    [found] = FORMAT.reader_can_read(parse(schema(5)), parse(schema(10)))
    assert (found.kind, found.location) == (
        "MAX_LENGTH_DECREASED",
        "#/properties/home/properties/zip/maxLength",
    )
    assert FORMAT.reader_can_read(parse(schema(10)), parse(schema(5))) == []


def test_refs_to_other_registered_schemas_are_compared_by_content() -> None:
    root = obj({"address": {"$ref": "address.json"}})
    old = parse(root, {"address.json": obj({"zip": STRING})})
    new = parse(root, {"address.json": obj({"zip": STRING}, required=["zip"])})
    assert kinds(FORMAT.reader_can_read(new, old)) == {"REQUIRED_ATTRIBUTE_ADDED"}
    assert FORMAT.reader_can_read(old, new) == []


def test_recursive_schemas_terminate_and_compare_structurally() -> None:
    def tree(value_type: str) -> dict[str, Any]:
        return obj({"value": {"type": value_type}, "children": {"type": "array", "items": {"$ref": "#"}}})

    assert FORMAT.reader_can_read(parse(tree("number")), parse(tree("number"))) == []
    found = FORMAT.reader_can_read(parse(tree("integer")), parse(tree("number")))
    assert kinds(found) == {"TYPE_NARROWED"}
    assert found[0].location == "#/properties/value/type"


def test_mutually_recursive_definitions_terminate() -> None:
    schema = {
        "$defs": {
            "a": obj({"b": {"$ref": "#/$defs/b"}}),
            "b": obj({"a": {"$ref": "#/$defs/a"}, "n": INTEGER}),
        },
        "$ref": "#/$defs/a",
    }
    assert FORMAT.reader_can_read(parse(schema), parse(schema)) == []


def test_ref_with_siblings_in_2019_and_later_applies_both() -> None:
    old = {"$schema": DRAFT2020, "$defs": {"s": STRING}, "properties": {"a": {"$ref": "#/$defs/s"}}}
    new = {
        "$schema": DRAFT2020,
        "$defs": {"s": STRING},
        "properties": {"a": {"$ref": "#/$defs/s", "maxLength": 3}},
    }
    assert kinds(FORMAT.reader_can_read(parse(new), parse(old))) == {"MAX_LENGTH_ADDED"}


def test_every_incompatibility_has_a_message_and_a_pointer_location() -> None:
    for _, old, new, _, _ in CASES:
        for reader, writer in ((new, old), (old, new)):
            for found in FORMAT.reader_can_read(parse(reader), parse(writer)):
                assert found.location.startswith("#")
                assert found.message


def test_comparing_with_another_format_reports_instead_of_raising() -> None:
    class Other:
        schema_type = "AVRO"

        def canonical(self) -> str:
            return "{}"

        def normalized(self) -> str:
            return "{}"

    [found] = FORMAT.reader_can_read(Other(), parse(STRING))
    assert found.kind == "SCHEMA_TYPE_CHANGED"


def test_dynamic_and_recursive_refs_are_followed() -> None:
    def tree_2020(value_type: str) -> dict[str, Any]:
        return {
            "$schema": DRAFT2020,
            "$dynamicAnchor": "node",
            **obj({"v": {"type": value_type}, "kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}),
        }

    def tree_2019(value_type: str) -> dict[str, Any]:
        return {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "$recursiveAnchor": True,
            **obj({"v": {"type": value_type}, "kids": {"type": "array", "items": {"$recursiveRef": "#"}}}),
        }

    for tree in (tree_2020, tree_2019):
        assert FORMAT.reader_can_read(parse(tree("number")), parse(tree("number"))) == []
        assert kinds(FORMAT.reader_can_read(parse(tree("integer")), parse(tree("number")))) == {
            "TYPE_NARROWED"
        }


def test_unevaluated_properties_close_the_reader_over_names_its_branches_declare() -> None:
    base = {"$schema": DRAFT2020, "allOf": [obj({"a": STRING})]}
    closed = {**base, "unevaluatedProperties": False}
    assert FORMAT.reader_can_read(parse(closed), parse(closed)) == []
    assert kinds(FORMAT.reader_can_read(parse(closed), parse(base))) == {"ADDITIONAL_PROPERTIES_REMOVED"}
    assert FORMAT.reader_can_read(parse(base), parse(closed)) == []
    wider = {**base, "properties": {"b": INTEGER}}
    assert kinds(FORMAT.reader_can_read(parse(closed), parse(wider))) == {
        "ADDITIONAL_PROPERTIES_REMOVED",
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    }
