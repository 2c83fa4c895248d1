"""The native Protobuf path (ptars over a whole column) gives exactly the per-record decoder's
column, for random message types and messages; a chunk holding a bad message falls back per record,
so the bad message alone fails."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.schema_registry.lookup import RegisteredSchema
from tabletopic.table.convert import native_protobuf
from tabletopic.table.convert.protobuf import ProtobufDecoder, message_descriptor

FDP = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "sint32": st.integers(-(2**31), 2**31 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "uint64": st.integers(0, 2**64 - 1),
    "fixed64": st.integers(0, 2**64 - 1),
    "sfixed32": st.integers(-(2**31), 2**31 - 1),
    "double": st.floats(allow_nan=False),
    "float": st.floats(width=32, allow_nan=False),
    "bool": st.booleans(),
    "string": st.text(max_size=10),
    "bytes": st.binary(max_size=10),
}
KEY_TYPES = ["int32", "int64", "string", "bool", "uint32"]


_TYPES = {
    "int32": FDP.TYPE_INT32, "int64": FDP.TYPE_INT64, "sint32": FDP.TYPE_SINT32,
    "uint32": FDP.TYPE_UINT32, "uint64": FDP.TYPE_UINT64, "fixed64": FDP.TYPE_FIXED64,
    "sfixed32": FDP.TYPE_SFIXED32, "double": FDP.TYPE_DOUBLE, "float": FDP.TYPE_FLOAT,
    "bool": FDP.TYPE_BOOL, "string": FDP.TYPE_STRING, "bytes": FDP.TYPE_BYTES,
}  # fmt: skip
_FILES = [0]


@st.composite
def proto_files(draw: Any) -> tuple[Descriptor, dict[str, list[tuple[str, str, str]]]]:
    """A proto3 file built as a descriptor (compiling .proto text takes seconds): message ``Root``
    plus up to two message types it uses and one enum; returns Root's descriptor and each message's
    fields as (label, type, name)."""
    messages: dict[str, list[tuple[str, str, str]]] = {}
    for name in ("Leaf", "Mid", "Root"):
        usable = [*messages, "Color"]
        fields = []
        for i in range(draw(st.integers(1, 5))):
            kind = draw(st.sampled_from(["scalar", "scalar", "optional", "repeated", "map", "message"]))
            type_ = draw(st.sampled_from([*SCALARS, *usable]))
            if kind == "map":
                value = draw(st.sampled_from([*SCALARS, *usable]))
                fields.append(("map", f"{draw(st.sampled_from(KEY_TYPES))},{value}", f"f{i}"))
            elif kind == "message" and messages:
                fields.append(("", draw(st.sampled_from(list(messages))), f"f{i}"))
            elif kind == "optional" and type_ not in messages:
                fields.append(("optional", type_, f"f{i}"))
            elif kind == "repeated":
                fields.append(("repeated", type_, f"f{i}"))
            else:
                fields.append(("", type_, f"f{i}"))
        messages[name] = fields
    _FILES[0] += 1
    proto = descriptor_pb2.FileDescriptorProto(name=f"prop{_FILES[0]}.proto", package="prop", syntax="proto3")
    enum = proto.enum_type.add(name="Color")
    for number, label in ((0, "RED"), (1, "GREEN"), (5, "BLUE")):
        enum.value.add(name=label, number=number)

    def set_type(field: Any, type_: str) -> None:
        if type_ in _TYPES:
            field.type = _TYPES[type_]
        else:
            field.type = FDP.TYPE_ENUM if type_ == "Color" else FDP.TYPE_MESSAGE
            field.type_name = f".prop.{type_}"

    for name in ("Root", "Mid", "Leaf"):
        message = proto.message_type.add(name=name)
        for n, (label, type_, field_name) in enumerate(messages[name], start=1):
            field = message.field.add(name=field_name, number=n, label=FDP.LABEL_OPTIONAL)
            if label == "map":
                key, value = type_.split(",")
                entry = message.nested_type.add(name=f"F{n}Entry")
                entry.options.map_entry = True
                set_type(entry.field.add(name="key", number=1, label=FDP.LABEL_OPTIONAL), key)
                set_type(entry.field.add(name="value", number=2, label=FDP.LABEL_OPTIONAL), value)
                field.label = FDP.LABEL_REPEATED
                field.type = FDP.TYPE_MESSAGE
                field.type_name = f".prop.{name}.F{n}Entry"
                continue
            set_type(field, type_)
            if label == "repeated":
                field.label = FDP.LABEL_REPEATED
            elif label == "optional":
                field.proto3_optional = True
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{field_name}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool.FindMessageTypeByName("prop.Root"), messages


def values(
    draw: Any, messages: dict[str, list[tuple[str, str, str]]], name: str, depth: int = 0
) -> dict[str, Any]:
    def one(type_: str) -> Any:
        if type_ == "Color":
            return draw(st.sampled_from([0, 1, 5, 7]))  # 7: an unknown number
        if type_ in messages:
            return values(draw, messages, type_, depth + 1)
        return draw(SCALARS[type_])

    out: dict[str, Any] = {}
    for label, type_, field in messages[name]:
        if not draw(st.booleans()):
            continue
        if label == "map":
            key, value = type_.split(",")
            out[field] = {draw(SCALARS[key]): one(value) for _ in range(draw(st.integers(0, 2)))}
        elif label == "repeated":
            out[field] = [one(type_) for _ in range(draw(st.integers(0, 3)))]
        else:
            out[field] = one(type_)
    return out


def _build(cls: Any, messages: dict[str, list[tuple[str, str, str]]], name: str, data: dict[str, Any]) -> Any:
    message = cls()
    for label, type_, field in messages[name]:
        if field not in data:
            continue
        value = data[field]
        sub_type = type_.split(",")[-1]
        target = getattr(message, field)
        if sub_type in messages:
            fd = cls.DESCRIPTOR.fields_by_name[field].message_type
            sub_cls = message_factory.GetMessageClass(
                fd.fields_by_number[2].message_type if label == "map" else fd
            )
        if label == "map":
            for k, v in value.items():
                if sub_type in messages:
                    target[k].CopyFrom(_build(sub_cls, messages, sub_type, v))
                else:
                    target[k] = v
        elif label == "repeated":
            for v in value:
                if sub_type in messages:
                    target.add().CopyFrom(_build(sub_cls, messages, sub_type, v))
                else:
                    target.append(v)
        elif type_ in messages:
            target.CopyFrom(_build(sub_cls, messages, type_, value))
        else:
            setattr(message, field, value)
    return message


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.data())
def test_native_and_per_record_decoding_give_identical_columns(data: st.DataObject) -> None:
    desc, messages = data.draw(proto_files())
    cls = message_factory.GetMessageClass(desc)
    # A few random messages (and a null) repeated up to the native path's minimum: drawing a
    # fresh message per row makes each example slow without finding more.
    distinct: list[bytes | None] = []
    for _ in range(data.draw(st.integers(1, 6))):
        message = _build(cls, messages, "Root", values(data.draw, messages, "Root"))
        distinct.append(b"\x00" + message.SerializeToString())
    count = native_protobuf.MIN_NATIVE_MESSAGES + 3
    payloads = [distinct[i % len(distinct)] for i in range(count)]
    payloads[3] = None
    decoder = ProtobufDecoder(desc)
    assert decoder._native is not None
    column = decoder._native.decode(payloads, 1)
    per_record, failures = decoder.decode_per_record(payloads, 1)
    assert not failures
    binary = pa.array([p[1:] for p in payloads if p is not None], pa.binary())
    decoder._native.decode_binary(binary)  # raises what made it fall back, if it did
    assert column is not None, "the native path fell back on valid messages"
    assert column.type == per_record.type
    # Map entries come in wire order from ptars and in hash order from the Python runtime: a map
    # has no order (Iceberg's neither), so entries are compared sorted.
    assert _sorted_maps(column.to_pylist()) == _sorted_maps(per_record.to_pylist())


def _sorted_maps(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_maps(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_sorted_maps(v) for v in value)
    if isinstance(value, list):
        items = [_sorted_maps(v) for v in value]
        if items and all(isinstance(v, tuple) and len(v) == 2 for v in items):
            return sorted(items, key=repr)
        return items
    return value


PROTO = 'syntax = "proto3";\nmessage M { string name = 1; int64 n = 2; }'


def test_a_bad_message_fails_alone_after_the_chunk_falls_back() -> None:
    desc = message_descriptor(RegisteredSchema(1, "PROTOBUF", PROTO))
    cls = message_factory.GetMessageClass(desc)
    payloads: list[bytes | None] = [cls(name=f"n{i}", n=i).SerializeToString() for i in range(200)]
    payloads[17] = b"\x0a\x05ab"  # a string field cut short
    payloads[90] = b"\x0a\x02\xff\xfe"  # a string that is not UTF-8
    array, failures = ProtobufDecoder(desc).decode(payloads)
    assert sorted(failures) == [17, 90]
    assert array.to_pylist()[18] == {"name": "n18", "n": 18} and array.to_pylist()[17] is None


def test_well_known_types_keep_the_per_record_decoder() -> None:
    text = (
        'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n'
        "message M { google.protobuf.Timestamp at = 1; }"
    )
    desc = message_descriptor(RegisteredSchema(1, "PROTOBUF", text))
    assert ProtobufDecoder(desc)._native is None
