"""Avro schema resolution as tables: (reader, writer) -> compatible or the kind and location of the
first finding; then the levels composed from it, including transitive ones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tabletopic.schema_registry.compatibility import CompatibilityLevel, PreviousSchema, check
from tabletopic.schema_registry.formats.avro import FORMAT, AvroSchema


def parse(schema: Any, references: dict[str, str] | None = None) -> AvroSchema:
    return FORMAT.parse(json.dumps(schema), references or {})


def rec(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def enum(*symbols: str, name: str = "E", **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


def fixed(size: int, name: str = "F", **extra: Any) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size, **extra}


PRIMITIVE_PROMOTIONS = [
    # (writer, reader, readable)
    ("int", "int", True),
    ("int", "long", True),
    ("int", "float", True),
    ("int", "double", True),
    ("long", "float", True),
    ("long", "double", True),
    ("float", "double", True),
    ("string", "bytes", True),
    ("bytes", "string", True),
    ("long", "int", False),
    ("double", "float", False),
    ("float", "long", False),
    ("double", "int", False),
    ("string", "int", False),
    ("boolean", "int", False),
    ("null", "string", False),
    ("int", "string", False),
    ("bytes", "int", False),
]


@pytest.mark.parametrize(("writer", "reader", "readable"), PRIMITIVE_PROMOTIONS)
def test_primitive_promotions_follow_the_avro_spec(writer: str, reader: str, readable: bool) -> None:
    found = FORMAT.reader_can_read(parse(reader), parse(writer))
    assert (not found) is readable
    if not readable:
        assert found[0].kind == "TYPE_MISMATCH"


# (name, reader, writer, expected: None when compatible else (kind, location))
CASES: list[tuple[str, Any, Any, tuple[str, str] | None]] = [
    (
        "added field with default",
        rec(field("a", "int"), field("b", "string", default="x")),
        rec(field("a", "int")),
        None,
    ),
    (
        "added field without default",
        rec(field("a", "int"), field("b", "string")),
        rec(field("a", "int")),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1"),
    ),
    ("removed field", rec(field("a", "int")), rec(field("a", "int"), field("b", "string")), None),
    ("field type promoted", rec(field("a", "long")), rec(field("a", "int")), None),
    (
        "field type narrowed",
        rec(field("a", "int")),
        rec(field("a", "long")),
        ("TYPE_MISMATCH", "/fields/0/type"),
    ),
    ("field renamed with alias", rec(field("b", "int", aliases=["a"])), rec(field("a", "int")), None),
    (
        "field renamed without alias",
        rec(field("b", "int")),
        rec(field("a", "int")),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0"),
    ),
    ("record renamed", rec(field("a", "int"), name="S"), rec(field("a", "int")), ("NAME_MISMATCH", "/name")),
    (
        "record renamed with alias",
        rec(field("a", "int"), name="S", aliases=["R"]),
        rec(field("a", "int")),
        None,
    ),
    (
        "namespace change keeps the short name",
        rec(field("a", "int"), namespace="x"),
        rec(field("a", "int"), namespace="y"),
        None,
    ),
    ("enum symbol added", enum("A", "B", "C"), enum("A", "B"), None),
    ("enum symbol removed", enum("A"), enum("A", "B"), ("MISSING_ENUM_SYMBOLS", "/symbols")),
    ("enum symbol removed with reader default", enum("A", "U", default="U"), enum("A", "B"), None),
    ("enum renamed", enum("A", name="G"), enum("A"), ("NAME_MISMATCH", "/name")),
    ("fixed same size", fixed(16), fixed(16), None),
    ("fixed size change", fixed(8), fixed(16), ("FIXED_SIZE_MISMATCH", "/size")),
    ("fixed renamed", fixed(4, name="G"), fixed(4), ("NAME_MISMATCH", "/name")),
    ("array items promoted", {"type": "array", "items": "long"}, {"type": "array", "items": "int"}, None),
    (
        "array items narrowed",
        {"type": "array", "items": "int"},
        {"type": "array", "items": "long"},
        ("TYPE_MISMATCH", "/items"),
    ),
    ("map values promoted", {"type": "map", "values": "double"}, {"type": "map", "values": "float"}, None),
    (
        "map values changed",
        {"type": "map", "values": "int"},
        {"type": "map", "values": "string"},
        ("TYPE_MISMATCH", "/values"),
    ),
    (
        "array vs map",
        {"type": "array", "items": "int"},
        {"type": "map", "values": "int"},
        ("TYPE_MISMATCH", "/"),
    ),
    (
        "writer branch added to union",
        ["null", "int"],
        ["null", "int", "string"],
        ("MISSING_UNION_BRANCH", "/2"),
    ),
    ("reader union covers writer union", ["null", "int", "string"], ["null", "int"], None),
    ("reader union covers via promotion", ["null", "long"], ["null", "int"], None),
    ("reader union covers plain writer", ["null", "string"], "string", None),
    ("reader union lacks plain writer", ["null", "string"], "int", ("MISSING_UNION_BRANCH", "/")),
    ("plain reader reads every writer branch", "long", ["int", "long"], None),
    ("plain reader misses a writer branch", "string", ["null", "string"], ("TYPE_MISMATCH", "/")),
    (
        "nested record field added without default",
        rec(field("inner", rec(field("x", "int"), field("y", "int"), name="I"))),
        rec(field("inner", rec(field("x", "int"), name="I"))),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0/type/fields/1"),
    ),
    (
        "nested record in array promoted",
        {"type": "array", "items": rec(field("x", "long"), name="I")},
        {"type": "array", "items": rec(field("x", "int"), name="I")},
        None,
    ),
    (
        "optional field made required",
        rec(field("a", "int")),
        rec(field("a", ["null", "int"], default=None)),
        ("TYPE_MISMATCH", "/fields/0/type"),
    ),
    (
        "required field made optional",
        rec(field("a", ["null", "int"], default=None)),
        rec(field("a", "int")),
        None,
    ),
    ("string read as bytes in record", rec(field("a", "bytes")), rec(field("a", "string")), None),
]


@pytest.mark.parametrize(("reader", "writer", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_reader_can_read_reports_kind_and_location(reader: Any, writer: Any, expected: Any) -> None:
    found = FORMAT.reader_can_read(parse(reader), parse(writer))
    if expected is None:
        assert found == []
    else:
        assert found, "expected an incompatibility"
        assert (found[0].kind, found[0].location) == expected
        assert found[0].message


def test_recursive_records_terminate_and_compare() -> None:
    linked = rec(field("value", "int"), field("next", ["null", "Node"], default=None), name="Node")
    widened = rec(field("value", "long"), field("next", ["null", "Node"], default=None), name="Node")
    assert FORMAT.reader_can_read(parse(widened), parse(linked)) == []
    assert FORMAT.reader_can_read(parse(linked), parse(widened))[0].kind == "TYPE_MISMATCH"


def test_every_incompatibility_is_reported_not_only_the_first() -> None:
    reader = rec(field("a", "int"), field("b", "string"), field("c", "boolean"))
    writer = rec(field("a", "string"))
    kinds = sorted(i.kind for i in FORMAT.reader_can_read(parse(reader), parse(writer)))
    assert kinds == [
        "READER_FIELD_MISSING_DEFAULT_VALUE",
        "READER_FIELD_MISSING_DEFAULT_VALUE",
        "TYPE_MISMATCH",
    ]


V1 = rec(field("a", "int"))
V2_ADD_DEFAULTED = rec(field("a", "int"), field("b", "string", default=""))
V2_ADD_REQUIRED = rec(field("a", "int"), field("b", "string"))
V2_DROP_A = rec(field("z", "int", default=0))


# (level, history, candidate, compatible)
LEVEL_CASES = [
    ("BACKWARD", [V1], V2_ADD_DEFAULTED, True),
    ("BACKWARD", [V1], V2_ADD_REQUIRED, False),
    ("FORWARD", [V1], V2_ADD_REQUIRED, True),
    ("FORWARD", [V2_ADD_REQUIRED], V1, False),
    ("FULL", [V1], V2_ADD_DEFAULTED, True),
    ("FULL", [V1], V2_ADD_REQUIRED, False),
    ("NONE", [V1], rec(field("a", "string")), True),
    ("BACKWARD", [V1], "string", False),
]


@pytest.mark.parametrize(("level", "history", "candidate", "compatible"), LEVEL_CASES)
def test_levels_compose_reader_can_read(
    level: str, history: list[Any], candidate: Any, compatible: bool
) -> None:
    previous = [PreviousSchema(i + 1, parse(s)) for i, s in enumerate(history)]
    failures = check(CompatibilityLevel(level), FORMAT, parse(candidate), previous)
    assert (not failures) is compatible


def test_non_transitive_levels_check_only_the_latest_version() -> None:
    # v1 {a:int}, v2 {z:int=0} (drops a, adds defaulted z), candidate {a:string,z}: compatible with v2
    # only; BACKWARD_TRANSITIVE also reads v1 data whose `a` is an int.
    history = [PreviousSchema(1, parse(V1)), PreviousSchema(2, parse(V2_DROP_A))]
    candidate = parse(rec(field("z", "int", default=0), field("a", "string", default="")))
    assert check(CompatibilityLevel.BACKWARD, FORMAT, candidate, history) == []
    failures = check(CompatibilityLevel.BACKWARD_TRANSITIVE, FORMAT, candidate, history)
    assert [f.version for f in failures] == [1]
    assert failures[0].direction == "BACKWARD"


def test_forward_and_full_transitive_check_old_readers_against_new_data() -> None:
    v2 = rec(field("a", "int", default=0), field("b", "int", default=1))
    history = [PreviousSchema(1, parse(rec(field("a", "int")))), PreviousSchema(2, parse(v2))]
    candidate = parse(rec(field("b", "int", default=1)))  # drops `a`, which v1 requires without default
    assert check(CompatibilityLevel.FORWARD, FORMAT, candidate, history) == []
    assert [f.version for f in check(CompatibilityLevel.FORWARD_TRANSITIVE, FORMAT, candidate, history)] == [
        1
    ]
    full = check(CompatibilityLevel.FULL_TRANSITIVE, FORMAT, candidate, history)
    assert {(f.version, f.direction) for f in full} == {(1, "FORWARD")}


def test_level_names_parse_in_any_case_and_reject_garbage() -> None:
    assert CompatibilityLevel.parse("full_transitive") is CompatibilityLevel.FULL_TRANSITIVE
    assert CompatibilityLevel.parse("Backward") is CompatibilityLevel.BACKWARD
    for garbage in ("", "SIDEWAYS", None, 3, ["FULL"]):
        assert CompatibilityLevel.parse(garbage) is None


# (rule, old schema, new schema, BACKWARD ok (new reads old), FORWARD ok (old reads new))
EVOLUTIONS: list[tuple[str, Any, Any, bool, bool]] = [
    ("add field with default", V1, V2_ADD_DEFAULTED, True, True),
    ("add field without default", V1, V2_ADD_REQUIRED, False, True),
    ("remove field with default", V2_ADD_DEFAULTED, V1, True, True),
    ("remove field without default", V2_ADD_REQUIRED, V1, True, False),
    ("int to long", rec(field("a", "int")), rec(field("a", "long")), True, False),
    ("long to double", rec(field("a", "long")), rec(field("a", "double")), True, False),
    ("float to double", rec(field("a", "float")), rec(field("a", "double")), True, False),
    ("string to bytes", rec(field("a", "string")), rec(field("a", "bytes")), True, True),
    ("int to string", rec(field("a", "int")), rec(field("a", "string")), False, False),
    ("add enum symbol", enum("A", "B"), enum("A", "B", "C"), True, False),
    (
        "add enum symbol with default",
        enum("A", "B", default="A"),
        enum("A", "B", "C", default="A"),
        True,
        True,
    ),
    ("widen union", ["null", "int"], ["null", "int", "string"], True, False),
    ("make optional", "int", ["null", "int"], True, False),
    ("fixed resize", fixed(4), fixed(8), False, False),
    (
        "rename with alias",
        rec(field("a", "int")),
        rec(field("a", "int"), name="S", aliases=["R"]),
        True,
        False,
    ),
    ("rename field with alias", rec(field("a", "int")), rec(field("b", "int", aliases=["a"])), True, False),
    (
        "array items widened",
        {"type": "array", "items": "int"},
        {"type": "array", "items": "long"},
        True,
        False,
    ),
    ("map values narrowed", {"type": "map", "values": "long"}, {"type": "map", "values": "int"}, False, True),
]


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"), [e[1:] for e in EVOLUTIONS], ids=[e[0] for e in EVOLUTIONS]
)
def test_each_evolution_in_both_directions(old: Any, new: Any, backward: bool, forward: bool) -> None:
    previous = [PreviousSchema(1, parse(old))]
    candidate = parse(new)
    assert (not check(CompatibilityLevel.BACKWARD, FORMAT, candidate, previous)) is backward
    assert (not check(CompatibilityLevel.FORWARD, FORMAT, candidate, previous)) is forward
    assert (not check(CompatibilityLevel.FULL, FORMAT, candidate, previous)) is (backward and forward)
    assert check(CompatibilityLevel.NONE, FORMAT, candidate, previous) == []
