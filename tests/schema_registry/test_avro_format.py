"""Avro parsing, the stored (compacted) and normalized forms, references and bad schemas."""

from __future__ import annotations

import json

import pytest

from tabletopic.schema_registry.formats.avro import FORMAT
from tabletopic.schema_registry.formats.base import InvalidSchema
from tabletopic.schema_registry.formats.loader import FormatUnavailable, available_types, get_format


def test_canonical_is_the_java_printed_form_not_parsing_canonical_form() -> None:
    text = (
        '{ "type": "record",\n "name": "R", "doc": "kept", '
        '"fields": [ {"name": "a", "type": "int", "default": 1} ] }'
    )
    assert FORMAT.parse(text, {}).canonical() == (
        '{"type":"record","name":"R","doc":"kept","fields":[{"name":"a","type":"int","default":1}]}'
    )


def test_normalized_form_qualifies_names_and_unwraps_primitives() -> None:
    a = FORMAT.parse(
        json.dumps(
            {
                "type": "record",
                "namespace": "n",
                "name": "R",
                "fields": [{"type": {"type": "int"}, "name": "a"}],
            }
        ),
        {},
    )
    b = FORMAT.parse(
        json.dumps({"name": "n.R", "type": "record", "fields": [{"name": "a", "type": "int"}]}), {}
    )
    assert a.canonical() == b.canonical()  # Java prints both alike, so Confluent stores one
    assert a.normalized() == b.normalized()
    assert json.loads(a.normalized())["name"] == "n.R"


def test_references_define_named_types_used_by_the_schema() -> None:
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "com.acme",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "com.acme",
            "fields": [{"name": "home", "type": "Address"}],
        }
    )
    parsed = FORMAT.parse(person, {"com.acme.Address": address})
    assert parsed.canonical() == json.dumps(json.loads(person), separators=(",", ":"))
    with pytest.raises(InvalidSchema):
        FORMAT.parse(person, {})


def test_bare_primitive_names_parse_like_quoted_ones() -> None:
    assert FORMAT.parse("string", {}).canonical() == '"string"'
    assert FORMAT.parse('"long"', {}).canonical() == '"long"'


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[",
        "null",
        "42",
        '{"type":"recrod","name":"R","fields":[]}',
        '{"type":"record","fields":[]}',
        '{"type":"record","name":"R","fields":[{"name":"a"}]}',
        '{"type":"record","name":"R","fields":[{"name":"a","type":"nosuch"}]}',
        '{"type":"enum","name":"E","symbols":["A","A"]}',
        '{"type":"enum","name":"E","symbols":["1x"]}',
        '{"type":"fixed","name":"F"}',
        '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
        '{"type":"record","name":"R","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]},'
        '"default":"B"}]}',
        '{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],"default":"x"}]}',
        '{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"a","type":"int"}]}',
        '["int","int"]',
        '{"type":"array"}',
        '{"type":"record","name":"R","fields":[{"name":"r","type":{"type":"record","name":"R","fields":[]}}]}',
        "\x00\xff garbage",
    ],
)
def test_invalid_avro_is_rejected_with_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema):
        FORMAT.parse(text, {})


def test_valid_defaults_of_every_kind_are_accepted() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "n", "type": ["null", "int"], "default": None},
            {"name": "b", "type": "boolean", "default": True},
            {"name": "d", "type": "double", "default": 1},
            {"name": "s", "type": "bytes", "default": "\u00ff"},
            {"name": "a", "type": {"type": "array", "items": "int"}, "default": [1, 2]},
            {"name": "m", "type": {"type": "map", "values": "long"}, "default": {"k": 1}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "ab"},
            {
                "name": "r",
                "type": {
                    "type": "record",
                    "name": "S",
                    "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int", "default": 0}],
                },
                "default": {"x": 1},
            },
        ],
    }
    FORMAT.parse(json.dumps(schema), {})


def test_unknown_schema_type_names_the_supported_ones() -> None:
    with pytest.raises(FormatUnavailable, match="AVRO"):
        get_format("XML")
    assert get_format(None) is FORMAT
    assert get_format("avro") is FORMAT
    assert "AVRO" in available_types()
