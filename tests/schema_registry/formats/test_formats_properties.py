"""Property tests: arbitrary input never escapes as anything but InvalidSchema, and every schema
that parses is compatible with itself and survives its own stored forms."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tabletopic.schema_registry.formats.base import InvalidSchema
from tabletopic.schema_registry.formats.jsonschema import FORMAT as JSON_FORMAT
from tabletopic.schema_registry.formats.protobuf import FORMAT as PROTOBUF_FORMAT
from tabletopic.table.convert.jsonschema_arrow import json_schema_to_arrow

SETTINGS = settings(
    max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)

TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
leaf_schemas = st.one_of(
    st.builds(lambda t: {"type": t}, st.sampled_from(TYPES)),
    st.builds(lambda ts: {"type": sorted(set(ts))}, st.lists(st.sampled_from(TYPES), min_size=1, max_size=3)),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 20)),
    st.builds(lambda n: {"type": "number", "minimum": n}, st.integers(-5, 5)),
    st.builds(lambda n: {"type": "integer", "multipleOf": n}, st.integers(1, 6)),
    st.builds(
        lambda vs: {"enum": vs}, st.lists(st.sampled_from(["a", "b", 1, None, True]), min_size=1, max_size=3)
    ),
    st.just({}),
    st.just(True),
    st.just(False),
)


def _compose(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["a", "b", "c", "d"])
    return st.one_of(
        st.builds(
            lambda props, required, extra: {
                "type": "object",
                "properties": props,
                "required": sorted(set(required) & set(props)),
                "additionalProperties": extra,
            },
            st.dictionaries(names, children, max_size=3),
            st.lists(names, max_size=2),
            st.one_of(st.booleans(), children),
        ),
        st.builds(
            lambda items, n: {"type": "array", "items": items, "maxItems": n}, children, st.integers(0, 4)
        ),
        st.builds(lambda bs: {"anyOf": bs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda bs: {"oneOf": bs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda bs: {"allOf": bs}, st.lists(children, min_size=1, max_size=2)),
        st.builds(lambda s: {"not": s}, children),
    )


json_schemas = st.recursive(leaf_schemas, _compose, max_leaves=8)


@SETTINGS
@given(st.text(max_size=60))
def test_json_schema_parse_of_any_text_raises_only_invalid_schema(text: str) -> None:
    try:
        JSON_FORMAT.parse(text, {})
    except InvalidSchema:
        pass


@SETTINGS
@given(json_values)
def test_json_schema_parse_of_any_json_value_raises_only_invalid_schema(value: Any) -> None:
    try:
        parsed = JSON_FORMAT.parse(json.dumps(value), {})
    except InvalidSchema:
        return
    assert JSON_FORMAT.reader_can_read(parsed, parsed) == []


@SETTINGS
@given(json_schemas)
# Found by this test in CI: the merged allOf writer gives "a" no type (the first branch bounds it
# only through additionalProperties), and the reader's first branch then refused it.
@example(
    {
        "allOf": [
            {"type": "object", "properties": {}, "required": [], "additionalProperties": {"type": "string"}},
            {"type": "object", "properties": {"a": {}}, "required": [], "additionalProperties": False},
        ]
    }
)
# Found by this test in CI: the same merge inside a reader's anyOf, whose branch was compared with
# the merged writer only.
@example(
    {
        "anyOf": [
            {
                "allOf": [
                    {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
                    {
                        "type": "object",
                        "properties": {"a": {}},
                        "required": ["a"],
                        "additionalProperties": False,
                    },
                ]
            }
        ]
    }
)
def test_json_schema_is_compatible_with_itself_and_its_normalized_form(schema: Any) -> None:
    parsed = JSON_FORMAT.parse(json.dumps(schema), {})
    normalized = JSON_FORMAT.parse(parsed.normalized(), {})
    assert JSON_FORMAT.reader_can_read(parsed, parsed) == []
    assert JSON_FORMAT.reader_can_read(normalized, parsed) == []
    assert JSON_FORMAT.reader_can_read(parsed, normalized) == []
    assert normalized.normalized() == parsed.normalized()
    json_schema_to_arrow(parsed)


@SETTINGS
@given(json_schemas, json_schemas)
def test_json_schema_comparison_of_any_two_schemas_returns_located_findings(reader: Any, writer: Any) -> None:
    found = JSON_FORMAT.reader_can_read(
        JSON_FORMAT.parse(json.dumps(reader), {}), JSON_FORMAT.parse(json.dumps(writer), {})
    )
    assert all(item.location.startswith("#") and item.kind and item.message for item in found)


@SETTINGS
@given(st.text(max_size=80))
def test_protobuf_parse_of_any_text_raises_only_invalid_schema(text: str) -> None:
    try:
        PROTOBUF_FORMAT.parse(text, {})
    except InvalidSchema:
        pass


@SETTINGS
@given(st.binary(max_size=80))
def test_protobuf_parse_of_any_base64_bytes_raises_only_invalid_schema(data: bytes) -> None:
    try:
        parsed = PROTOBUF_FORMAT.parse(base64.b64encode(data).decode(), {})
    except InvalidSchema:
        return
    assert PROTOBUF_FORMAT.reader_can_read(parsed, parsed) == []


SCALARS = ["int32", "int64", "uint32", "sint64", "fixed32", "sfixed64", "bool", "string", "bytes", "double"]
fields = st.lists(
    st.tuples(st.sampled_from(["", "repeated ", "optional "]), st.sampled_from([*SCALARS, "Inner", "E"])),
    min_size=1,
    max_size=6,
)


def _proto(spec: list[tuple[str, str]], oneof: bool) -> str:
    lines = [f"  {label}{kind} f{n} = {n};" for n, (label, kind) in enumerate(spec, start=1)]
    if oneof:
        lines.append(f"  oneof choice {{ string o1 = {len(spec) + 1}; int64 o2 = {len(spec) + 2}; }}")
    body = "\n".join(lines)
    return (
        'syntax = "proto3";\npackage prop;\n'
        f"message Top {{\n{body}\n  message Inner {{ string x = 1; Inner next = 2; }}\n}}\n"
        "enum E { E0 = 0; E1 = 1; }\n"
    )


@SETTINGS
@given(fields, st.booleans())
def test_protobuf_schema_survives_its_stored_forms_and_reads_itself(
    spec: list[tuple[str, str]], oneof: bool
) -> None:
    parsed = PROTOBUF_FORMAT.parse(_proto(spec, oneof), {})
    for text in (parsed.canonical(), parsed.normalized(), parsed.serialized()):
        again = PROTOBUF_FORMAT.parse(text, {})
        assert again.normalized() == parsed.normalized()
        assert PROTOBUF_FORMAT.reader_can_read(again, parsed) == []


@SETTINGS
@given(fields, fields)
def test_protobuf_comparison_of_any_two_schemas_returns_located_findings(
    one: list[tuple[str, str]], two: list[tuple[str, str]]
) -> None:
    found = PROTOBUF_FORMAT.reader_can_read(
        PROTOBUF_FORMAT.parse(_proto(one, False), {}), PROTOBUF_FORMAT.parse(_proto(two, True), {})
    )
    assert all(item.location.startswith("#/") and item.kind and item.message for item in found)


def test_a_crashing_rule_answers_incompatible_instead_of_raising() -> None:
    def boom(*_: Any) -> list[Any]:
        raise RuntimeError("rule defect")

    json_schema = JSON_FORMAT.parse('{"type": "string"}', {})
    proto = PROTOBUF_FORMAT.parse('syntax = "proto3";\nmessage M { int32 a = 1; }\n', {})
    for fmt, parsed in ((JSON_FORMAT, json_schema), (PROTOBUF_FORMAT, proto)):
        [found] = dataclasses.replace(fmt, check=boom).reader_can_read(parsed, parsed)
        assert found.kind == "COMPATIBILITY_CHECK_FAILED" and "rule defect" in found.message
