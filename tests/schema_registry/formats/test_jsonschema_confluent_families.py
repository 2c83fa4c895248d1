"""JSON Schema compatibility families where registries disagree, with Confluent's answers.

Each row gives an old and a new schema and whether the change is compatible under BACKWARD (the
new schema reads data written with the old one) and under FORWARD (the old one reads the new
one's). Every row is checked at the top level and again nested inside an object property and
inside array items, where the answer must not change.

Two deliberate departures from Confluent, both where its syntactic diff would let data through
that the new reader rejects, are documented in docs/schema-registry.md and pinned at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tabletopic.schema_registry.formats.jsonschema import FORMAT

DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"
S = {"type": "string"}
N = {"type": "number"}
I = {"type": "integer"}  # noqa: E741 - reads as the JSON type it stands for


def closed(properties: dict[str, Any], **keywords: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False, **keywords}


def array(**keywords: Any) -> dict[str, Any]:
    return {"type": "array", **keywords}


# (family, old, new, compatible under BACKWARD, compatible under FORWARD)
FAMILIES: list[tuple[str, Any, Any, bool, bool]] = [
    # true / false / {} schemas
    ("true evolved to object", True, {"type": "object"}, False, True),
    ("empty schema evolved to string", {}, S, False, True),
    ("empty schema evolved to number", {}, N, False, True),
    ("true evolved to array", True, array(items=I), False, True),
    ("true evolved to false", True, False, False, True),
    ("true evolved to not-everything", True, {"not": {}}, False, True),
    ("empty schema and true are the same", {}, True, True, True),
    ("false evolved to a closed object", False, closed({"a": I}), True, False),
    # propertyNames
    (
        "propertyNames added, pattern matches every name",
        {"type": "object"},
        {"type": "object", "propertyNames": {"pattern": "a*"}},
        True,
        True,
    ),
    (
        "propertyNames added, anchored pattern",
        {"type": "object"},
        {"type": "object", "propertyNames": {"pattern": "^a"}},
        False,
        True,
    ),
    (
        "propertyNames added over a closed model whose names all match",
        closed({"ab": I}),
        closed({"ab": I}, propertyNames={"pattern": "^a"}),
        True,
        True,
    ),
    (
        "propertyNames added over a closed model with a name that does not match",
        closed({"b": I}),
        closed({"b": I}, propertyNames={"pattern": "^a"}),
        False,
        True,
    ),
    (
        "propertyNames narrowed",
        {"type": "object", "propertyNames": {"maxLength": 10}},
        {"type": "object", "propertyNames": {"maxLength": 5}},
        False,
        True,
    ),
    # patternProperties
    (
        "patternProperties narrowed",
        {"type": "object", "patternProperties": {"^a": N}},
        {"type": "object", "patternProperties": {"^a": I}},
        False,
        True,
    ),
    (
        "patternProperties added over an open model",
        {"type": "object"},
        {"type": "object", "patternProperties": {"^a": I}},
        False,
        True,
    ),
    (
        "property covered by patternProperties of a closed model",
        closed({}, patternProperties={"^x_": S}),
        closed({"x_a": S}, patternProperties={"^x_": S}),
        True,
        True,
    ),
    # closed content models gaining properties; properties changed
    ("closed model gains an optional property", closed({"a": S}), closed({"a": S, "b": I}), True, False),
    (
        "closed model gains a required property",
        closed({"a": S}),
        closed({"a": S, "b": I}, required=["b"]),
        False,
        False,
    ),
    (
        "closed model gains a required property with a default",
        closed({"a": S}),
        closed({"a": S, "b": {"type": "integer", "default": 0}}, required=["b"]),
        True,
        False,
    ),
    (
        "object property type changed",
        {"type": "object", "properties": {"a": S}},
        {"type": "object", "properties": {"a": I}},
        False,
        False,
    ),
    (
        "object property narrowed",
        {"type": "object", "properties": {"a": N}},
        {"type": "object", "properties": {"a": I}},
        False,
        True,
    ),
    # arrays and tuples
    ("array evolved to tuple", array(items=I), array(items=[I]), False, False),
    (
        "array evolved to 2020-12 prefixItems",
        {"$schema": DRAFT2020, **array(items=I)},
        {"$schema": DRAFT2020, **array(prefixItems=[I])},
        False,
        False,
    ),
    ("tuple item added to an open tuple", array(items=[S]), array(items=[S, I]), False, True),
    ("additionalItems removed", array(items=[S]), array(items=[S], additionalItems=False), False, True),
    (
        "additionalItems changed",
        array(items=[S], additionalItems=S),
        array(items=[S], additionalItems=N),
        False,
        False,
    ),
    (
        "additionalItems without a tuple turned false",
        {"additionalItems": True},
        {"additionalItems": False},
        False,
        True,
    ),
    ("additionalItems without a tuple changed", {"additionalItems": S}, {"additionalItems": N}, False, False),
    (
        "minContains increased",
        {"$schema": DRAFT2020, **array(contains=N, minContains=1)},
        {"$schema": DRAFT2020, **array(contains=N, minContains=2)},
        False,
        True,
    ),
    (
        "maxContains decreased",
        {"$schema": DRAFT2020, **array(contains=N, maxContains=3)},
        {"$schema": DRAFT2020, **array(contains=N, maxContains=2)},
        False,
        True,
    ),
    (
        "minContains added at its default",
        {"$schema": DRAFT2020, **array(contains=N)},
        {"$schema": DRAFT2020, **array(contains=N, minContains=1)},
        True,
        True,
    ),
    # unevaluatedItems / unevaluatedProperties in partially open content models
    (
        "item removed from a partially open tuple (unevaluatedItems)",
        {"$schema": DRAFT2020, **array(prefixItems=[S, N, N], unevaluatedItems=S)},
        {"$schema": DRAFT2020, **array(prefixItems=[S, N], unevaluatedItems=S)},
        False,
        False,
    ),
    (
        "item added and covered by unevaluatedItems",
        {"$schema": DRAFT2020, **array(prefixItems=[S, N], unevaluatedItems=S)},
        {"$schema": DRAFT2020, **array(prefixItems=[S, N, S], unevaluatedItems=S)},
        True,
        True,
    ),
    (
        "unevaluatedItems narrowed",
        {"$schema": DRAFT2020, **array(prefixItems=[S], unevaluatedItems=N)},
        {"$schema": DRAFT2020, **array(prefixItems=[S], unevaluatedItems=I)},
        False,
        True,
    ),
    (
        "property added, not covered by unevaluatedProperties",
        {"$schema": DRAFT2020, "type": "object", "properties": {"a": S}, "unevaluatedProperties": S},
        {"$schema": DRAFT2020, "type": "object", "properties": {"a": S, "b": I}, "unevaluatedProperties": S},
        False,
        False,
    ),
    (
        "property added, covered by unevaluatedProperties",
        {"$schema": DRAFT2020, "type": "object", "properties": {"a": S}, "unevaluatedProperties": S},
        {"$schema": DRAFT2020, "type": "object", "properties": {"a": S, "b": S}, "unevaluatedProperties": S},
        True,
        True,
    ),
    (
        "unevaluatedProperties closed",
        {"$schema": DRAFT2020, "type": "object", "properties": {"a": S}},
        {"$schema": DRAFT2020, "type": "object", "properties": {"a": S}, "unevaluatedProperties": False},
        False,
        True,
    ),
    # required arrays changed without changing their meaning
    (
        "required reordered",
        {"type": "object", "properties": {"a": S, "b": S}, "required": ["a", "b"]},
        {"type": "object", "properties": {"a": S, "b": S}, "required": ["b", "a"]},
        True,
        True,
    ),
    (
        "required moved into allOf",
        {"type": "object", "properties": {"a": S}, "required": ["a"]},
        {"type": "object", "properties": {"a": S}, "allOf": [{"required": ["a"]}]},
        True,
        True,
    ),
    (
        "required removed",
        {"type": "object", "properties": {"a": S}, "required": ["a"]},
        {"type": "object", "properties": {"a": S}},
        True,
        False,
    ),
]


def at_top(schema: Any) -> Any:
    return schema


def in_property(schema: Any) -> Any:
    return _nest(schema, lambda inner: {"type": "object", "properties": {"x": inner}})


def in_items(schema: Any) -> Any:
    return _nest(schema, lambda inner: {"type": "array", "items": inner})


def _nest(schema: Any, wrap: Callable[[Any], dict[str, Any]]) -> Any:
    """Wrap ``schema`` one level down, keeping ``$schema`` at the root where it belongs."""
    if isinstance(schema, dict) and "$schema" in schema:
        inner = {k: v for k, v in schema.items() if k != "$schema"}
        return {"$schema": schema["$schema"], **wrap(inner)}
    return wrap(schema)


def compatible(reader: Any, writer: Any) -> bool:
    parsed_reader = FORMAT.parse(json.dumps(reader), {})
    parsed_writer = FORMAT.parse(json.dumps(writer), {})
    return not FORMAT.reader_can_read(parsed_reader, parsed_writer)


@pytest.mark.parametrize("level", [at_top, in_property, in_items], ids=["top", "property", "items"])
@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"),
    [pytest.param(*row[1:], id=row[0]) for row in FAMILIES],
)
def test_family_answers_as_confluent_in_both_directions_at_every_level(
    level: Callable[[Any], Any], old: Any, new: Any, backward: bool, forward: bool
) -> None:
    old_schema, new_schema = level(old), level(new)
    assert compatible(new_schema, old_schema) is backward, "BACKWARD (new reads old)"
    assert compatible(old_schema, new_schema) is forward, "FORWARD (old reads new)"


def test_required_naming_an_undeclared_property_stays_incompatible() -> None:
    """Confluent compares ``required`` only over properties both sides declare, so it calls this
    compatible; data without ``bar`` that the old schema wrote fails the new one, so we do not."""
    old = {"properties": {"foo": S}, "required": ["foo"]}
    new = {"properties": {"foo": S}, "required": ["bar"]}
    assert not compatible(new, old)


def test_reader_accepting_everything_reads_any_writer() -> None:
    """Karapace rejects ``true`` reading a non-object writer; Confluent (and the content model)
    accept it, and so do we."""
    for writer in (S, N, array(items=I), {"enum": ["A", "B"]}, {"not": {}}):
        assert compatible(True, writer)
        assert compatible({}, writer)
