"""Protobuf wire compatibility rules, checked in both directions.

Each case gives the old and new message bodies and the incompatibility kinds expected when the new
schema reads bytes written with the old one (BACKWARD) and when the old one reads the new one's
(FORWARD).
"""

from __future__ import annotations

import pytest

from tabletopic.schema_registry.formats.base import Incompatibility
from tabletopic.schema_registry.formats.protobuf import FORMAT, ParsedProtobufSchema


def proto3(body: str, package: str = "shop", imports: str = "") -> str:
    return f'syntax = "proto3";\npackage {package};\n{imports}\n{body}\n'


def proto2(body: str) -> str:
    return f'syntax = "proto2";\npackage shop;\n{body}\n'


def m(fields: str, name: str = "Order") -> str:
    return proto3(f"message {name} {{\n{fields}\n}}")


# (id, old, new, kinds when new reads old, kinds when old reads new)
CASES: list[tuple[str, str, str, set[str], set[str]]] = [
    ("identical", m("int32 a = 1;"), m("int32 a = 1;"), set(), set()),
    ("field added", m("int32 a = 1;"), m("int32 a = 1; string b = 2;"), set(), set()),
    ("field renamed", m("int32 a = 1;"), m("int32 renamed = 1;"), set(), set()),
    ("field number changed", m("int32 a = 1;"), m("int32 a = 2;"), set(), set()),
    ("int32 widened to int64", m("int32 a = 1;"), m("int64 a = 1;"), set(), set()),
    ("uint64 and bool share the varint encoding", m("uint64 a = 1;"), m("bool a = 1;"), set(), set()),
    (
        "enum read as int32",
        proto3("enum E { E0 = 0; } message Order { E a = 1; }"),
        m("int32 a = 1;"),
        set(),
        set(),
    ),
    (
        "int32 to sint32 misreads zigzag",
        m("int32 a = 1;"),
        m("sint32 a = 1;"),
        {"FIELD_SCALAR_KIND_CHANGED"},
        {"FIELD_SCALAR_KIND_CHANGED"},
    ),
    ("sint32 widened to sint64", m("sint32 a = 1;"), m("sint64 a = 1;"), set(), set()),
    ("fixed32 and sfixed32 share encoding", m("fixed32 a = 1;"), m("sfixed32 a = 1;"), set(), set()),
    (
        "fixed32 to fixed64",
        m("fixed32 a = 1;"),
        m("fixed64 a = 1;"),
        {"FIELD_SCALAR_KIND_CHANGED"},
        {"FIELD_SCALAR_KIND_CHANGED"},
    ),
    ("fixed64 and sfixed64 share encoding", m("fixed64 a = 1;"), m("sfixed64 a = 1;"), set(), set()),
    (
        "float to double",
        m("float a = 1;"),
        m("double a = 1;"),
        {"FIELD_SCALAR_KIND_CHANGED"},
        {"FIELD_SCALAR_KIND_CHANGED"},
    ),
    ("string and bytes share encoding", m("string a = 1;"), m("bytes a = 1;"), set(), set()),
    (
        "int32 to string",
        m("int32 a = 1;"),
        m("string a = 1;"),
        {"FIELD_SCALAR_KIND_CHANGED"},
        {"FIELD_SCALAR_KIND_CHANGED"},
    ),
    (
        "message to bytes",
        proto3("message Order { Item a = 1; } message Item { int32 x = 1; }"),
        proto3("message Order { bytes a = 1; } message Item { int32 x = 1; }"),
        {"FIELD_KIND_CHANGED"},
        {"FIELD_KIND_CHANGED"},
    ),
    (
        "message type renamed",
        proto3("message Order { Item a = 1; } message Item { int32 x = 1; }"),
        proto3("message Order { Thing a = 1; } message Item { int32 x = 1; } message Thing { int32 x = 1; }"),
        {"FIELD_NAMED_TYPE_CHANGED"},
        {"FIELD_NAMED_TYPE_CHANGED", "MESSAGE_REMOVED"},
    ),
    (
        "nested message field changed",
        m("Item a = 1; message Item { double price = 1; }"),
        m("Item a = 1; message Item { string price = 1; }"),
        {"FIELD_SCALAR_KIND_CHANGED"},
        {"FIELD_SCALAR_KIND_CHANGED"},
    ),
    (
        "well-known type swapped",
        proto3(
            "message Order { google.protobuf.Timestamp at = 1; }",
            imports='import "google/protobuf/timestamp.proto";',
        ),
        proto3(
            "message Order { google.protobuf.Duration at = 1; }",
            imports='import "google/protobuf/duration.proto";',
        ),
        {"FIELD_NAMED_TYPE_CHANGED"},
        {"FIELD_NAMED_TYPE_CHANGED"},
    ),
    (
        "numeric singular to repeated",
        m("int32 a = 1;"),
        m("repeated int32 a = 1;"),
        set(),
        {"FIELD_NUMERIC_LABEL_CHANGED"},
    ),
    ("string singular to repeated", m("string a = 1;"), m("repeated string a = 1;"), set(), set()),
    (
        "message singular to repeated",
        m("Item a = 1; message Item { int32 x = 1; }"),
        m("repeated Item a = 1; message Item { int32 x = 1; }"),
        set(),
        {"FIELD_MESSAGE_LABEL_CHANGED"},
    ),
    (
        "map value type changed",
        m("map<string, int32> a = 1;"),
        m("map<string, string> a = 1;"),
        {"FIELD_SCALAR_KIND_CHANGED"},
        {"FIELD_SCALAR_KIND_CHANGED"},
    ),
    ("map value widened", m("map<string, int32> a = 1;"), m("map<string, int64> a = 1;"), set(), set()),
    (
        "map to repeated message",
        m("map<string, int32> a = 1;"),
        m("repeated Pair a = 1; message Pair { string key = 1; int32 value = 2; }"),
        {"FIELD_KIND_CHANGED"},
        {"FIELD_KIND_CHANGED", "MESSAGE_REMOVED"},
    ),
    (
        "required field added",
        proto2("message Order { optional int32 a = 1; }"),
        proto2("message Order { optional int32 a = 1; required int32 b = 2; }"),
        {"REQUIRED_FIELD_ADDED"},
        {"REQUIRED_FIELD_REMOVED"},
    ),
    (
        "optional field made required",
        proto2("message Order { optional int32 a = 1; }"),
        proto2("message Order { required int32 a = 1; }"),
        {"REQUIRED_FIELD_ADDED"},
        set(),
    ),
    (
        "single field moved into a new oneof",
        m("int32 a = 1; int32 b = 2;"),
        m("oneof choice { int32 a = 1; } int32 b = 2;"),
        set(),
        set(),
    ),
    (
        "several fields moved into one oneof",
        m("int32 a = 1; int32 b = 2;"),
        m("oneof choice { int32 a = 1; int32 b = 2; }"),
        {"MULTIPLE_FIELDS_MOVED_TO_ONEOF"},
        set(),
    ),
    (
        "field moved into an existing oneof",
        m("oneof choice { int32 a = 1; } int32 b = 2;"),
        m("oneof choice { int32 a = 1; int32 b = 2; }"),
        {"FIELD_MOVED_TO_EXISTING_ONEOF"},
        set(),
    ),
    (
        "two oneofs merged",
        m("oneof x { int32 a = 1; } oneof y { int32 b = 2; }"),
        m("oneof x { int32 a = 1; int32 b = 2; }"),
        {"MULTIPLE_FIELDS_MOVED_TO_ONEOF"},
        set(),
    ),
    (
        "new field added to an existing oneof",
        m("oneof choice { int32 a = 1; }"),
        m("oneof choice { int32 a = 1; string b = 2; }"),
        set(),
        {"ONEOF_FIELD_REMOVED"},
    ),
    ("oneof removed keeping its field", m("oneof choice { int32 a = 1; }"), m("int32 a = 1;"), set(), set()),
    (
        "oneof renamed",
        m("oneof x { int32 a = 1; string b = 2; }"),
        m("oneof y { int32 a = 1; string b = 2; }"),
        set(),
        set(),
    ),
    (
        "proto3 optional is not a oneof",
        m("int32 a = 1; int32 b = 2;"),
        m("optional int32 a = 1; optional int32 b = 2;"),
        set(),
        set(),
    ),
    (
        "reserved number dropped",
        m("int32 a = 1; reserved 2;"),
        m("int32 a = 1;"),
        {"RESERVED_FIELD_REMOVED"},
        set(),
    ),
    (
        "reserved number reused",
        m("int32 a = 1; reserved 2;"),
        m("int32 a = 1; string b = 2;"),
        {"FIELD_CONFLICTS_WITH_RESERVED"},
        set(),
    ),
    (
        "reserved name reused",
        m('int32 a = 1; reserved "b";'),
        m("int32 a = 1; string b = 2;"),
        {"FIELD_CONFLICTS_WITH_RESERVED"},
        set(),
    ),
    (
        "removed field reserved",
        m("int32 a = 1; string b = 2;"),
        m('int32 a = 1; reserved 2; reserved "b";'),
        set(),
        {"FIELD_CONFLICTS_WITH_RESERVED"},
    ),
    ("reserved ranges split", m("reserved 2 to 10;"), m("reserved 2 to 5, 6 to 10;"), set(), set()),
    (
        "package changed",
        m("int32 a = 1;"),
        proto3("message Order { int32 a = 1; }", package="store"),
        {"PACKAGE_CHANGED"},
        {"PACKAGE_CHANGED"},
    ),
    (
        "message removed",
        proto3("message Order { int32 a = 1; } message Refund { int32 a = 1; }"),
        m("int32 a = 1;"),
        {"MESSAGE_REMOVED"},
        set(),
    ),
    (
        "first message renamed",
        m("int32 a = 1;"),
        m("int32 a = 1;", name="Purchase"),
        {"MESSAGE_REMOVED"},
        {"MESSAGE_REMOVED"},
    ),
    ("nested message removed", m("message Item { int32 x = 1; }"), m(""), {"MESSAGE_REMOVED"}, set()),
    (
        "messages reordered",
        proto3("message A { int32 a = 1; } message B { int32 b = 1; }"),
        proto3("message B { int32 b = 1; } message A { int32 a = 1; }"),
        set(),
        set(),
    ),
    (
        "open enum value removed",
        proto3("enum E { E0 = 0; E1 = 1; } message Order { E e = 1; }"),
        proto3("enum E { E0 = 0; } message Order { E e = 1; }"),
        set(),
        set(),
    ),
    (
        "closed enum value removed",
        proto2("enum E { E0 = 0; E1 = 1; } message Order { optional E e = 1; }"),
        proto2("enum E { E0 = 0; } message Order { optional E e = 1; }"),
        {"ENUM_CONST_REMOVED"},
        set(),
    ),
    (
        "enum removed",
        proto3("enum E { E0 = 0; } message Order { int32 a = 1; }"),
        m("int32 a = 1;"),
        set(),
        set(),
    ),
    (
        "recursive message unchanged",
        m("int32 a = 1; Order parent = 2;"),
        m("int32 a = 1; Order parent = 2;"),
        set(),
        set(),
    ),
    (
        "recursive message changed",
        m("int32 a = 1; Order parent = 2;"),
        m("sint32 a = 1; Order parent = 2;"),
        {"FIELD_SCALAR_KIND_CHANGED"},
        {"FIELD_SCALAR_KIND_CHANGED"},
    ),
]


def parse(text: str, references: dict[str, str] | None = None) -> ParsedProtobufSchema:
    return FORMAT.parse(text, references or {})


def kinds(found: list[Incompatibility]) -> set[str]:
    return {i.kind for i in found}


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_compatibility_rule_in_both_directions(
    old: str, new: str, backward: set[str], forward: set[str]
) -> None:
    old_schema, new_schema = parse(old), parse(new)
    assert kinds(FORMAT.reader_can_read(new_schema, old_schema)) == backward
    assert kinds(FORMAT.reader_can_read(old_schema, new_schema)) == forward


def test_locations_name_the_message_and_field_number() -> None:
    old = m("Item a = 1; message Item { double price = 1; }")
    new = m("Item a = 1; message Item { string price = 1; }")
    [found] = FORMAT.reader_can_read(parse(new), parse(old))
    assert found.location == "#/Order.Item/1"
    assert "double" in found.message and "string" in found.message


def test_oneof_findings_are_located_at_the_oneof() -> None:
    [found] = FORMAT.reader_can_read(
        parse(m("oneof choice { int32 a = 1; int32 b = 2; }")), parse(m("int32 a = 1; int32 b = 2;"))
    )
    assert found.location == "#/Order/choice"


def test_types_from_references_are_compared_by_content() -> None:
    main = proto3("message Order { common.Money total = 1; }", imports='import "common.proto";')
    money_v1 = proto3("message Money { int64 units = 1; }", package="common")
    money_v2 = proto3("message Money { double units = 1; }", package="common")
    old, new = parse(main, {"common.proto": money_v1}), parse(main, {"common.proto": money_v2})
    [found] = FORMAT.reader_can_read(new, old)
    assert (found.kind, found.location) == ("FIELD_SCALAR_KIND_CHANGED", "#/Money/1")
    assert FORMAT.reader_can_read(old, parse(main, {"common.proto": money_v1})) == []


def test_text_and_base64_forms_of_one_schema_are_compatible() -> None:
    text = m("int32 a = 1; map<string, Item> items = 2; message Item { string x = 1; }")
    parsed = parse(text)
    assert FORMAT.reader_can_read(parse(parsed.serialized()), parsed) == []
    assert FORMAT.reader_can_read(parsed, parse(parsed.serialized())) == []


def test_comparing_with_another_format_reports_instead_of_raising() -> None:
    from tabletopic.schema_registry.formats.jsonschema import FORMAT as JSON_FORMAT

    [found] = FORMAT.reader_can_read(JSON_FORMAT.parse('{"type": "string"}', {}), parse(m("int32 a = 1;")))
    assert found.kind == "SCHEMA_TYPE_CHANGED"


def test_closed_enums_in_editions_are_checked_like_proto2() -> None:
    def edition(values: str) -> str:
        return (
            'edition = "2023";\npackage shop;\n'
            f"enum E {{ option features.enum_type = CLOSED; {values} }}\nmessage Order {{ E e = 1; }}\n"
        )

    old, new = parse(edition("E0 = 0; E1 = 1;")), parse(edition("E0 = 0;"))
    assert kinds(FORMAT.reader_can_read(new, old)) == {"ENUM_CONST_REMOVED"}
    assert FORMAT.reader_can_read(old, new) == []
