"""JSON Schema parsing: every supported draft, references, the stored forms, and garbage."""

from __future__ import annotations

import json

import pytest

from tabletopic.schema_registry.formats.base import InvalidSchema
from tabletopic.schema_registry.formats.jsonschema import FORMAT, ParsedJsonSchema
from tabletopic.schema_registry.formats.loader import get_format

DRAFTS = {
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}


def parse(schema: object, references: dict[str, str] | None = None) -> ParsedJsonSchema:
    return FORMAT.parse(json.dumps(schema), references or {})


def test_format_object_is_what_the_registry_loader_finds() -> None:
    assert FORMAT.schema_type == "JSON"
    assert get_format("JSON") is FORMAT


@pytest.mark.parametrize("draft", DRAFTS)
def test_parse_accepts_a_valid_schema_of_every_draft(draft: str) -> None:
    schema = {
        "$schema": DRAFTS[draft],
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 0}, "name": {"type": "string"}},
        "required": ["id"],
    }
    parsed = parse(schema)
    assert parsed.schema_type == "JSON"
    assert parsed.validator().is_valid({"id": 1, "name": "x"})
    assert not parsed.validator().is_valid({"name": "x"})


@pytest.mark.parametrize("draft", DRAFTS)
def test_parse_rejects_a_metaschema_violation_in_every_draft(draft: str) -> None:
    with pytest.raises(InvalidSchema, match="invalid schema"):
        parse({"$schema": DRAFTS[draft], "type": "strin"})


def test_parse_uses_the_draft_rules_for_exclusive_bounds() -> None:
    parse({"$schema": DRAFTS["draft-04"], "minimum": 0, "exclusiveMinimum": True})
    parse({"$schema": DRAFTS["draft-07"], "exclusiveMinimum": 0})
    with pytest.raises(InvalidSchema):
        parse({"$schema": DRAFTS["draft-04"], "exclusiveMinimum": 0})
    with pytest.raises(InvalidSchema):
        parse({"$schema": DRAFTS["draft-07"], "exclusiveMinimum": True})


def test_parse_defaults_to_draft_7_without_schema_keyword() -> None:
    assert parse({"type": "string"}).dialect == "http://json-schema.org/draft-07/schema"


def test_parse_accepts_boolean_schemas() -> None:
    assert parse(True).canonical() == "true"
    assert parse(False).canonical() == "false"


def test_parse_accepts_2020_12_prefix_items_and_defs() -> None:
    parsed = parse(
        {
            "$schema": DRAFTS["2020-12"],
            "$defs": {"n": {"type": "integer"}},
            "type": "array",
            "prefixItems": [{"type": "string"}, {"$ref": "#/$defs/n"}],
            "items": False,
        }
    )
    assert parsed.validator().is_valid(["a", 1])
    assert not parsed.validator().is_valid(["a", "b"])


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t ",
        "{",
        '{"type": "string"',
        "[]",
        "42",
        '"string"',
        "null",
        "NaN",
        '{"maximum": Infinity}',
        "\x00\x01\x02",
        '{"type": "string"} trailing',
        "[" * 100_000 + "]" * 100_000,
        '{"$schema": "http://example.com/my-own-draft"}',
        '{"$schema": 7}',
        '{"type": "object", "properties": []}',
        '{"required": "name"}',
    ],
)
def test_parse_raises_invalid_schema_for_garbage(text: str) -> None:
    with pytest.raises(InvalidSchema):
        FORMAT.parse(text, {})


def test_parse_raises_invalid_schema_for_non_string_input() -> None:
    with pytest.raises(InvalidSchema):
        FORMAT.parse(b'{"type": "string"}', {})  # type: ignore[arg-type]


def test_parse_raises_invalid_schema_for_deeply_nested_valid_json() -> None:
    text = '{"items":' * 5_000 + '{"type":"string"}' + "}" * 5_000
    with pytest.raises(InvalidSchema):
        FORMAT.parse(text, {})


def test_parse_and_compatibility_survive_nesting_near_the_recursion_limit() -> None:
    text = '{"items":' * 300 + '{"type":"string"}' + "}" * 300
    try:
        parsed = FORMAT.parse(text, {})
    except InvalidSchema:
        return
    assert FORMAT.reader_can_read(parsed, parsed) == []


ADDRESS = {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]}


def test_parse_resolves_refs_through_the_references_mapping() -> None:
    parsed = parse(
        {"type": "object", "properties": {"address": {"$ref": "address.json"}}},
        {"address.json": json.dumps(ADDRESS)},
    )
    assert parsed.validator().is_valid({"address": {"zip": "123"}})
    assert not parsed.validator().is_valid({"address": {}})


def test_parse_resolves_relative_refs_against_the_schema_id() -> None:
    parsed = parse(
        {"$id": "https://acme.example/schemas/person.json", "properties": {"a": {"$ref": "address.json"}}},
        {"address.json": json.dumps(ADDRESS)},
    )
    assert not parsed.validator().is_valid({"a": {"zip": 1}})


def test_parse_resolves_refs_by_the_referenced_schema_id() -> None:
    address = {**ADDRESS, "$id": "https://acme.example/address.json"}
    parsed = parse(
        {"properties": {"a": {"$ref": "https://acme.example/address.json"}}},
        {"whatever-name": json.dumps(address)},
    )
    assert not parsed.validator().is_valid({"a": {}})


def test_parse_follows_refs_between_references() -> None:
    zip_code = {"type": "string", "pattern": "^[0-9]{5}$"}
    address = {"type": "object", "properties": {"zip": {"$ref": "zip.json"}}}
    parsed = parse(
        {"properties": {"a": {"$ref": "address.json"}}},
        {"zip.json": json.dumps(zip_code), "address.json": json.dumps(address)},
    )
    assert parsed.validator().is_valid({"a": {"zip": "12345"}})
    assert not parsed.validator().is_valid({"a": {"zip": "1234"}})


def test_parse_rejects_a_ref_that_resolves_nowhere() -> None:
    with pytest.raises(InvalidSchema, match="unresolved"):
        parse({"properties": {"a": {"$ref": "missing.json"}}})
    with pytest.raises(InvalidSchema, match="unresolved"):
        parse({"properties": {"a": {"$ref": "#/definitions/missing"}}})


@pytest.mark.parametrize("reference", ["", "{", "[]", '{"type": 5}'])
def test_parse_rejects_an_invalid_reference(reference: str) -> None:
    with pytest.raises(InvalidSchema, match=r"reference 'address\.json'"):
        parse({"properties": {"a": {"$ref": "address.json"}}}, {"address.json": reference})


def test_canonical_is_compact_json_in_the_given_key_order() -> None:
    text = (
        '{\n  "type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},\n'
        '  "$id": "x"\n}'
    )
    parsed = FORMAT.parse(text, {})
    assert (
        parsed.canonical()
        == '{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}},"$id":"x"}'
    )


def test_canonical_keeps_non_ascii_text() -> None:
    assert parse({"description": "café ☕"}).canonical() == '{"description":"café ☕"}'


def test_normalized_is_the_same_for_equivalent_spellings() -> None:
    one = parse(
        {
            "type": ["string", "null"],
            "required": ["b", "a"],
            "enum": ["y", "x", None],
            "properties": {"a": {"type": ["integer"]}},
        }
    )
    two = parse(
        {
            "properties": {"a": {"type": "integer"}},
            "enum": [None, "x", "y", "x"],
            "required": ["a", "b"],
            "type": ["null", "string"],
        }
    )
    assert one.canonical() != two.canonical()
    assert one.normalized() == two.normalized()


def test_normalized_leaves_data_named_like_keywords_alone() -> None:
    parsed = parse(
        {
            "properties": {"type": {"type": ["string"]}, "required": {"enum": [["b", "a"]]}},
            "default": {"type": ["b", "a"]},
        }
    )
    normalized = json.loads(parsed.normalized())
    assert normalized["properties"]["type"] == {"type": "string"}
    assert normalized["properties"]["required"] == {"enum": [["b", "a"]]}
    assert normalized["default"] == {"type": ["b", "a"]}


def test_normalized_output_parses_back_to_the_same_normalized_form() -> None:
    parsed = parse({"type": "object", "properties": {"z": {"type": "string"}, "a": {"$ref": "#/$defs/x"}},
                    "$defs": {"x": {"type": ["integer", "null"]}}})  # fmt: skip
    again = FORMAT.parse(parsed.normalized(), {})
    assert again.normalized() == parsed.normalized()


def test_parsed_schemas_compare_by_canonical_form() -> None:
    assert parse({"type": "string"}) == FORMAT.parse('{ "type" : "string" }', {})
    assert parse({"type": "string"}) != parse({"type": "integer"})
    assert len({parse({"type": "string"}), parse({"type": "string"})}) == 1
