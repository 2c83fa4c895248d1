"""Confluent message-index framing and the Protobuf -> Arrow mapping."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tabletopic.schema_registry.formats.protobuf import (
    FORMAT,
    MessageIndexError,
    message_descriptor_for,
    message_indexes_of,
    read_message_indexes,
    write_message_indexes,
)
from tabletopic.table.convert.protobuf_arrow import protobuf_to_arrow

NESTED = """syntax = "proto3";
package n;
message A {
  message A0 { int32 x = 1; }
  message A1 {
    message Deep { int32 y = 1; }
  }
}
message B {}
"""


@pytest.mark.parametrize(
    ("data", "indexes"),
    [
        (b"\x00", [0]),
        (b"\x02\x02", [1]),
        (b"\x04\x00\x02", [0, 1]),
        (b"\x06\x00\x02\x00", [0, 1, 0]),
        (b"\x02\x80\x01", [64]),
    ],
)
def test_read_message_indexes_decodes_zigzag_lists(data: bytes, indexes: list[int]) -> None:
    assert read_message_indexes(data + b"rest", 0) == (indexes, len(data))
    assert read_message_indexes(b"\x00\x00\x00\x00\x07" + data, 5) == (indexes, 5 + len(data))


@pytest.mark.parametrize("indexes", [[0], [1], [0, 1], [3, 2, 1, 0], [300], [0, 0]])
def test_write_then_read_message_indexes_round_trips(indexes: list[int]) -> None:
    encoded = write_message_indexes(indexes)
    assert read_message_indexes(encoded, 0) == (indexes, len(encoded))


def test_first_message_uses_the_single_zero_byte_shorthand() -> None:
    assert write_message_indexes([0]) == b"\x00"


@pytest.mark.parametrize(
    "data",
    [b"", b"\x04\x00", b"\x80", b"\x01", b"\xff" * 11, b"\x02\x01", b"\xfe\x01" + b"\x00" * 127],
)
def test_corrupt_message_indexes_raise_message_index_error(data: bytes) -> None:
    with pytest.raises(MessageIndexError):
        read_message_indexes(data, 0)


def test_read_message_indexes_accepts_bytes_one_by_one_extended() -> None:
    encoded = write_message_indexes([2, 0, 5])
    for cut in range(len(encoded)):
        with pytest.raises(MessageIndexError):
            read_message_indexes(encoded[:cut], 0)
    assert read_message_indexes(memoryview(encoded + b"\xff"), 0)[0] == [2, 0, 5]


def test_message_descriptor_for_walks_nested_messages() -> None:
    parsed = FORMAT.parse(NESTED, {})
    assert message_descriptor_for(parsed, [0]).full_name == "n.A"
    assert message_descriptor_for(parsed, []).full_name == "n.A"
    assert message_descriptor_for(parsed, [1]).full_name == "n.B"
    assert message_descriptor_for(parsed, [0, 1, 0]).full_name == "n.A.A1.Deep"
    for name in ("n.A", "n.B", "n.A.A0", "n.A.A1.Deep"):
        assert message_descriptor_for(parsed, message_indexes_of(parsed, name)).full_name == name


@pytest.mark.parametrize("indexes", [[2], [0, 2], [1, 0], [0, 1, 0, 0]])
def test_message_descriptor_for_rejects_indexes_past_the_end(indexes: list[int]) -> None:
    with pytest.raises(MessageIndexError):
        message_descriptor_for(FORMAT.parse(NESTED, {}), indexes)


ALL_TYPES = """syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/duration.proto";
message Event {
  double d = 1;
  float f = 2;
  int32 i32 = 3;
  sint32 s32 = 4;
  uint32 u32 = 5;
  int64 i64 = 6;
  uint64 u64 = 7;
  fixed64 f64 = 8;
  bool ok = 9;
  string s = 10;
  bytes raw = 11;
  Kind kind = 12;
  optional int32 maybe = 13;
  google.protobuf.Timestamp at = 14;
  google.protobuf.Int64Value wrapped = 15;
  google.protobuf.Struct attrs = 16;
  google.protobuf.Duration took = 17;
  repeated string tags = 18;
  map<string, Child> children = 19;
  Child child = 20;
  oneof choice { string a = 21; int64 b = 22; }
  Event parent = 23;
  message Child { string name = 1; repeated int32 points = 2; }
  enum Kind { KIND_UNKNOWN = 0; KIND_CLICK = 1; }
}
"""


def test_protobuf_to_arrow_maps_every_field_kind() -> None:
    parsed = FORMAT.parse(ALL_TYPES, {})
    schema = protobuf_to_arrow(message_descriptor_for(parsed, [0]))
    child = pa.struct(
        [
            pa.field("name", pa.string(), nullable=False),
            pa.field("points", pa.list_(pa.field("element", pa.int32(), nullable=False)), nullable=False),
        ]
    )
    expected = {
        "d": (pa.float64(), False),
        "f": (pa.float32(), False),
        "i32": (pa.int32(), False),
        "s32": (pa.int32(), False),
        "u32": (pa.int64(), False),
        "i64": (pa.int64(), False),
        "u64": (pa.int64(), False),
        "f64": (pa.int64(), False),
        "ok": (pa.bool_(), False),
        "s": (pa.string(), False),
        "raw": (pa.binary(), False),
        "kind": (pa.string(), False),
        "maybe": (pa.int32(), True),
        "at": (pa.timestamp("us", tz="UTC"), True),
        "wrapped": (pa.int64(), True),
        "attrs": (pa.string(), True),
        "took": (pa.int64(), True),
        "tags": (pa.list_(pa.field("element", pa.string(), nullable=False)), False),
        "children": (pa.map_(pa.string(), pa.field("value", child, nullable=True)), False),
        "child": (child, True),
        "a": (pa.string(), True),
        "b": (pa.int64(), True),
        "parent": (pa.string(), True),
    }
    assert schema.names == list(expected)
    for name, (data_type, nullable) in expected.items():
        assert (schema.field(name).type, schema.field(name).nullable) == (data_type, nullable), name
    assert schema.field("i32").metadata == {b"protobuf.field_number": b"3"}


def test_protobuf_to_arrow_can_keep_unsigned_64_bit_values_exact() -> None:
    parsed = FORMAT.parse(ALL_TYPES, {})
    schema = protobuf_to_arrow(message_descriptor_for(parsed, [0]), uint64_as="decimal")
    assert schema.field("u64").type == pa.decimal128(20, 0)
    assert schema.field("i64").type == pa.int64()


def test_protobuf_to_arrow_marks_proto2_fields_nullable_and_required_not() -> None:
    parsed = FORMAT.parse(
        'syntax = "proto2";\nmessage M { required int32 a = 1; optional int32 b = 2; repeated int32 c = 3; }',
        {},
    )
    schema = protobuf_to_arrow(message_descriptor_for(parsed, [0]))
    assert [schema.field(n).nullable for n in "abc"] == [False, True, False]
