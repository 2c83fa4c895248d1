"""Protobuf parsing: both input forms, references, rendering, garbage, and a decode round trip."""

from __future__ import annotations

import base64
import struct

import pytest
from google.protobuf import descriptor_pb2, message_factory

from tabletopic.schema_registry.formats.base import InvalidSchema
from tabletopic.schema_registry.formats.loader import get_format
from tabletopic.schema_registry.formats.protobuf import (
    FORMAT,
    ParsedProtobufSchema,
    message_descriptor_for,
    read_message_indexes,
    write_message_indexes,
)
from tabletopic.schema_registry.lookup import RegisteredSchema
from tests.schema_registry.formats.protohelp import independent_pool, serialized_descriptor

COMMON = """syntax = "proto3";
package acme.common;

message Money {
  string currency = 1;
  int64 units = 2;
}
"""

ORDER = """syntax = "proto3";
package acme.orders;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "acme/common.proto";

option java_package = "com.acme.orders";

// An order as the shop writes it.
message Order {
  int64 id = 1;
  string customer = 2 [deprecated = true];
  google.protobuf.Timestamp placed_at = 3;
  map<string, Line> lines = 4;
  optional int32 priority = 5;
  oneof payment {
    string card = 6;
    bytes token = 7;
  }
  repeated Status history = 8;
  acme.common.Money total = 9;
  google.protobuf.StringValue note = 10;
  reserved 20, 30 to 40, 100 to max;
  reserved "legacy";

  message Line {
    string sku = 1;
    uint32 quantity = 2;
    Line replaces = 3;
  }
  enum Status {
    STATUS_UNKNOWN = 0;
    STATUS_PAID = 1;
  }
}

message Refund {
  int64 order_id = 1;
}

enum Channel {
  CHANNEL_UNKNOWN = 0;
  CHANNEL_WEB = 1;
}

service Orders {
  rpc Get(Refund) returns (stream Order);
}
"""

PROTO2 = """syntax = "proto2";
package legacy;

message Item {
  required string id = 1;
  optional int32 count = 2 [default = 7];
  optional string label = 3 [default = "n/a"];
  repeated int64 values = 4 [packed = true];
  optional group Extra = 5 {
    optional string info = 1;
  }
  extensions 100 to 199;
}

extend Item {
  optional string flag = 100;
}
"""

REFS = {"acme/common.proto": COMMON}


def parse(text: str, references: dict[str, str] | None = None) -> ParsedProtobufSchema:
    return FORMAT.parse(text, references or {})


def test_format_object_is_what_the_registry_loader_finds() -> None:
    assert FORMAT.schema_type == "PROTOBUF"
    assert get_format("PROTOBUF") is FORMAT


def test_parse_proto3_text_with_references_and_well_known_imports() -> None:
    parsed = parse(ORDER, REFS)
    assert parsed.schema_type == "PROTOBUF"
    assert parsed.syntax == "proto3"
    assert parsed.message_names() == ["acme.orders.Order", "acme.orders.Refund"]
    assert set(parsed.dependencies) >= {"acme/common.proto", "google/protobuf/timestamp.proto"}


def test_parse_proto2_text_with_defaults_groups_and_extensions() -> None:
    parsed = parse(PROTO2)
    assert parsed.syntax == "proto2"
    again = parse(parsed.canonical())
    assert again.file == parsed.file


def test_parse_base64_descriptor_as_clients_send_it() -> None:
    encoded = serialized_descriptor({**REFS, "acme/orders.proto": ORDER}, "acme/orders.proto")
    parsed = parse(encoded, REFS)
    assert parsed.file.name == "acme/orders.proto"
    assert parsed.canonical() == parse(ORDER, REFS).canonical()


def test_parse_base64_descriptor_with_base64_references() -> None:
    files = {**REFS, "acme/orders.proto": ORDER}
    parsed = parse(
        serialized_descriptor(files, "acme/orders.proto"),
        {"acme/common.proto": serialized_descriptor(files, "acme/common.proto")},
    )
    assert parsed.message_names()[0] == "acme.orders.Order"


def test_parse_text_importing_a_base64_reference() -> None:
    reference = serialized_descriptor(REFS, "acme/common.proto")
    parsed = parse(ORDER, {"acme/common.proto": reference})
    assert parsed.canonical() == parse(ORDER, REFS).canonical()


def test_parse_accepts_base64_split_over_lines() -> None:
    encoded = serialized_descriptor({"x.proto": COMMON}, "x.proto")
    wrapped = "\n".join(encoded[i : i + 40] for i in range(0, len(encoded), 40))
    assert parse(wrapped).message_names() == ["acme.common.Money"]


def test_serialized_round_trips_through_parse() -> None:
    parsed = parse(ORDER, REFS)
    again = parse(parsed.serialized(), REFS)
    assert again.canonical() == parsed.canonical()
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(parsed.serialized()))
    assert proto.package == "acme.orders"


@pytest.mark.parametrize("text", [ORDER, PROTO2])
def test_canonical_and_normalized_renderings_compile_back_to_the_same_schema(text: str) -> None:
    refs = REFS if text is ORDER else {}
    parsed = parse(text, refs)
    from_canonical = parse(parsed.canonical(), refs)
    from_normalized = parse(parsed.normalized(), refs)
    assert from_canonical.canonical() == parsed.canonical()
    assert from_normalized.normalized() == parsed.normalized()
    assert from_canonical.normalized() == parsed.normalized()


def test_canonical_rendering_is_readable_proto() -> None:
    canonical = parse(ORDER, REFS).canonical()
    assert canonical.startswith('syntax = "proto3";\npackage acme.orders;\n')
    assert "map<string, Line> lines = 4;" in canonical
    assert "optional int32 priority = 5;" in canonical
    assert "reserved 20, 30 to 40, 100 to max;" in canonical
    assert "LinesEntry" not in canonical


def test_normalized_is_insensitive_to_field_import_and_option_order() -> None:
    one = """syntax = "proto3";
package p;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
message M {
  string b = 2 [json_name = "bee", deprecated = true];
  google.protobuf.Timestamp a = 1;
  google.protobuf.Duration c = 3;
}
"""
    two = """syntax = "proto3";
package p;
import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";
message M {
  .google.protobuf.Timestamp a = 1;
  string b = 2 [deprecated = true, json_name = "bee"];
  .google.protobuf.Duration c = 3;
}
"""
    assert parse(one).canonical() != parse(two).canonical()
    assert parse(one).normalized() == parse(two).normalized()
    assert ".google.protobuf.Timestamp a = 1;" in parse(one).normalized()


def test_canonical_keeps_names_qualified_where_a_short_name_would_resolve_elsewhere() -> None:
    text = """syntax = "proto3";
package p;
message Inner { string x = 1; }
message Outer {
  message Inner { int32 y = 1; }
  .p.Inner top = 1;
  Inner mine = 2;
}
"""
    parsed = parse(text)
    again = parse(parsed.canonical())
    assert again.file == parsed.file


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('syntax = "proto3";\nmessage A {\n  strin x = 1;\n}\n', '3:3: "strin" is not defined'),
        ('syntax = "proto3";\nmessage A { int32 x = 1 }\n', "2:25"),
        (
            'syntax = "proto3";\nmessage A { int32 x = 1; int32 y = 1; }\n',
            "Field number 1 has already been used",
        ),
        ('syntax = "proto3";\nimport "missing.proto";\nmessage A {}\n', "missing.proto"),
        ('syntax = "proto4";', "proto4"),
    ],
)
def test_protoc_errors_become_invalid_schema_with_protoc_message(text: str, fragment: str) -> None:
    with pytest.raises(InvalidSchema) as info:
        parse(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "\n\t\n",
        "abc",
        "AAAA",
        "not base64 at all!",
        base64.b64encode(b"\xff\xfe\x00garbage").decode(),
        base64.b64encode(b"").decode() + "=",
        base64.b64encode(descriptor_pb2.FileDescriptorProto(name="empty.proto").SerializeToString()).decode(),
        '{"type": "record", "name": "Avro"}',
        "\x00\x01\x02",
        "message {",
    ],
)
def test_garbage_raises_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema):
        parse(text)


def test_non_string_input_raises_invalid_schema() -> None:
    with pytest.raises(InvalidSchema):
        FORMAT.parse(None, {})  # type: ignore[arg-type]


def test_base64_descriptor_with_unresolved_types_raises_invalid_schema() -> None:
    proto = descriptor_pb2.FileDescriptorProto(name="a.proto", package="x", syntax="proto3")
    message = proto.message_type.add(name="A")
    message.field.add(name="b", number=1, type=11, type_name=".x.Missing", label=1)
    with pytest.raises(InvalidSchema, match="Missing"):
        parse(base64.b64encode(proto.SerializeToString()).decode())


def test_base64_descriptor_with_an_unknown_import_raises_invalid_schema() -> None:
    encoded = serialized_descriptor({**REFS, "o.proto": ORDER}, "o.proto")
    with pytest.raises(InvalidSchema, match=r"acme/common\.proto"):
        parse(encoded)


@pytest.mark.parametrize("name", ["../escape.proto", "/abs.proto", "a//b.proto", "a\\b.proto"])
def test_reference_names_cannot_escape_the_compile_directory(name: str) -> None:
    with pytest.raises(InvalidSchema):
        parse('syntax = "proto3";\nmessage A {}\n', {name: COMMON})


def test_empty_reference_raises_invalid_schema() -> None:
    with pytest.raises(InvalidSchema):
        parse(ORDER, {"acme/common.proto": "  "})


def test_message_serialized_by_a_compiled_class_decodes_through_the_parsed_pool() -> None:
    files = {**REFS, "acme/orders.proto": ORDER}
    producer_pool = independent_pool(files, "acme/orders.proto")
    order_class = message_factory.GetMessageClass(producer_pool.FindMessageTypeByName("acme.orders.Order"))
    sent = order_class(id=42, priority=3, card="4111", history=[1, 0])
    sent.placed_at.seconds = 1_700_000_000
    sent.lines["a"].sku = "SKU-1"
    sent.lines["a"].replaces.sku = "SKU-0"
    sent.total.currency = "EUR"
    sent.note.value = "leave at door"
    # The Confluent framing: magic byte, schema id, message indexes, message bytes.
    frame = b"\x00" + struct.pack(">I", 7) + write_message_indexes([0]) + sent.SerializeToString()

    parsed = parse(serialized_descriptor(files, "acme/orders.proto"), REFS)
    indexes, position = read_message_indexes(frame, 5)
    decoded_class = message_factory.GetMessageClass(message_descriptor_for(parsed, indexes))
    received = decoded_class.FromString(frame[position:])
    assert received.id == 42 and received.priority == 3 and received.WhichOneof("payment") == "card"
    assert received.placed_at.seconds == 1_700_000_000
    assert received.lines["a"].replaces.sku == "SKU-0"
    assert list(received.history) == [1, 0]
    assert received.total.currency == "EUR" and received.note.value == "leave at door"


def test_second_message_decodes_by_index_and_registered_schema_is_accepted() -> None:
    files = {**REFS, "acme/orders.proto": ORDER}
    refund_class = message_factory.GetMessageClass(
        independent_pool(files, "acme/orders.proto").FindMessageTypeByName("acme.orders.Refund")
    )
    payload = write_message_indexes([1]) + refund_class(order_id=9).SerializeToString()
    registered = RegisteredSchema(
        schema_id=1, schema_type="PROTOBUF", schema=ORDER, references=tuple(REFS.items())
    )
    indexes, position = read_message_indexes(payload, 0)
    desc = message_descriptor_for(registered, indexes)
    assert desc.full_name == "acme.orders.Refund"
    assert message_factory.GetMessageClass(desc).FromString(payload[position:]).order_id == 9


def test_two_versions_of_one_message_name_parse_side_by_side() -> None:
    one = parse('syntax = "proto3";\npackage v;\nmessage M { int32 a = 1; }\n')
    two = parse('syntax = "proto3";\npackage v;\nmessage M { string a = 1; }\n')
    assert one.pool is not two.pool
    assert one.canonical() != two.canonical()


BUILTIN_IMPORTS = """syntax = "proto3";
package pay;
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
import "google/type/date.proto";
message Payment {
  option (confluent.message_meta) = { doc: "a payment" };
  confluent.type.Decimal amount = 1 [(confluent.field_meta) = { params: [{key: "precision", value: "8"}] }];
  google.type.Date day = 2;
}
"""


def test_files_clients_treat_as_built_in_need_no_references() -> None:
    parsed = parse(BUILTIN_IMPORTS)
    assert {"confluent/meta.proto", "confluent/type/decimal.proto", "google/type/date.proto"} <= set(
        parsed.dependencies
    )
    assert '(confluent.message_meta) = { doc: "a payment" }' in parsed.canonical()
    assert parse(parsed.serialized()).canonical() == parsed.canonical()
    assert parse(parsed.normalized()).normalized() == parsed.normalized()


def test_editions_files_parse_and_render_back() -> None:
    text = """edition = "2023";
package ed;
option features.field_presence = IMPLICIT;
message M {
  int32 a = 1 [features.field_presence = EXPLICIT];
  repeated int32 b = 2;
  reserved d;
  enum E { option features.enum_type = CLOSED; E0 = 0; }
}
"""
    parsed = parse(text)
    assert parsed.canonical().startswith('edition = "2023";')
    assert parse(parsed.canonical()).normalized() == parsed.normalized()
    assert parse(parsed.serialized()).canonical() == parsed.canonical()


def _without_json_names(proto: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """protoc fills ``json_name`` in; runtime descriptors leave it out."""
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(proto)
    copy.ClearField("source_code_info")

    def clear(message: descriptor_pb2.DescriptorProto) -> None:
        for fld in [*message.field, *message.extension]:
            fld.ClearField("json_name")
        for nested in message.nested_type:
            clear(nested)

    for message in copy.message_type:
        clear(message)
    for fld in copy.extension:
        fld.ClearField("json_name")
    return copy


def test_canonical_rendering_of_every_built_in_file_compiles_to_the_same_descriptor() -> None:
    from tabletopic.schema_registry.formats.protobuf.render import render
    from tabletopic.schema_registry.formats.protobuf.schema import compile_proto_files, well_known_files

    files = {n: descriptor_pb2.FileDescriptorProto.FromString(b) for n, b in well_known_files().items()}
    assert {"google/protobuf/descriptor.proto", "google/protobuf/timestamp.proto"} <= set(files)
    for name, proto in files.items():
        text = render(proto, [files[d] for d in proto.dependency if d in files])
        compiled = compile_proto_files({name: text}, [name])[name]
        assert _without_json_names(compiled) == _without_json_names(proto), name


def test_what_confluent_clients_send_and_fetch_round_trips() -> None:
    # The helpers confluent-kafka's ProtobufSerializer/Deserializer use (pinned version).
    from confluent_kafka.schema_registry.common.protobuf import _init_pool, _schema_to_str, _str_to_proto
    from google.protobuf import descriptor_pool

    files = {**REFS, "acme/orders.proto": ORDER}
    producer_pool = independent_pool(files, "acme/orders.proto")
    order_class = message_factory.GetMessageClass(producer_pool.FindMessageTypeByName("acme.orders.Order"))
    order_file = order_class.DESCRIPTOR.file
    [common_file] = [d for d in order_file.dependencies if d.name == "acme/common.proto"]

    common = parse(_schema_to_str(common_file))
    order = parse(_schema_to_str(order_file), {"acme/common.proto": _schema_to_str(common_file)})

    consumer_pool = descriptor_pool.DescriptorPool()
    _init_pool(consumer_pool)
    consumer_pool.Add(_str_to_proto("acme/common.proto", common.serialized()))
    consumer_pool.Add(_str_to_proto("acme/orders.proto", order.serialized()))
    consumer_class = message_factory.GetMessageClass(consumer_pool.FindMessageTypeByName("acme.orders.Order"))
    sent = order_class(id=5, card="x")
    sent.total.units = 12
    assert consumer_class.FromString(sent.SerializeToString()).total.units == 12
