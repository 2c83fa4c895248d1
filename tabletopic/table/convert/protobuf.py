"""Protobuf values to Arrow.

Type mapping: int32/sint32/sfixed32 -> int32; int64/sint64/sfixed64/uint32/fixed32/uint64/fixed64 ->
int64 (Iceberg has no unsigned types; uint64 above 2^63 wraps, as in AutoMQ); float/double; bool;
string; bytes -> binary; enum -> string (the value name); message -> struct; repeated -> list;
map<K, V> -> map<string, V> (keys as text); ``google.protobuf.Timestamp`` -> timestamp(us, UTC).

Descriptors come from the Protobuf format module (``message_descriptor_for``), imported lazily; when
that module is absent, the schema text is compiled with grpcio-tools' bundled protoc (once per
schema id thanks to the decoder cache).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from tabletopic.schema_registry.lookup import RegisteredSchema
from tabletopic.table.convert.arrowutil import values_to_array

_TIMESTAMP = "google.protobuf.Timestamp"
_SCALARS: dict[int, pa.DataType] = {
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.int64(),
    FieldDescriptor.TYPE_FIXED64: pa.int64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
}
_UNSIGNED_64 = {FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64}


class ProtobufSchemaError(ValueError):
    """The schema does not compile or names no such message."""


def read_message_indexes(buf: bytes | memoryview, pos: int) -> tuple[tuple[int, ...], int]:
    """Confluent's message-index path after the schema id: a zig-zag varint count, then that many
    zig-zag varint indexes; a count of 0 is the common shorthand for ``[0]`` (first message)."""
    count, pos = _zigzag(buf, pos)
    if count == 0:
        return (0,), pos
    if count < 0 or count > 100:
        raise ValueError(f"bad Protobuf message-index count {count}")
    indexes = []
    for _ in range(count):
        index, pos = _zigzag(buf, pos)
        if index < 0:
            raise ValueError(f"negative Protobuf message index {index}")
        indexes.append(index)
    return tuple(indexes), pos


def _zigzag(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint in Protobuf message indexes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long in Protobuf message indexes")


def message_descriptor(
    schema: RegisteredSchema, indexes: Sequence[int] | None = None, full_name: str | None = None
) -> Descriptor:
    """The descriptor of the message named by ``indexes`` (wire format) or ``full_name``
    (by_latest_schema), defaulting to the file's first message."""
    try:
        from tabletopic.schema_registry.formats.protobuf import (  # type: ignore[import-not-found]
            message_descriptor_for,
        )
    except ImportError:
        file_desc = _compile(schema)
    else:
        if full_name is None:
            return message_descriptor_for(schema, list(indexes or (0,)))
        first = message_descriptor_for(schema, [0])
        file_desc = first.file
    if full_name is not None:
        try:
            return file_desc.pool.FindMessageTypeByName(full_name)
        except KeyError:
            raise ProtobufSchemaError(f"schema {schema.schema_id} has no message {full_name!r}") from None
    path = list(indexes or (0,))
    try:
        desc = list(file_desc.message_types_by_name.values())[path[0]]
        for index in path[1:]:
            desc = desc.nested_types[index]
    except IndexError:
        raise ProtobufSchemaError(f"schema {schema.schema_id} has no message at index path {path}") from None
    return desc


def _compile(schema: RegisteredSchema) -> Any:
    from grpc_tools import protoc

    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="tabletopic-proto-") as tmp:
        files = {**dict(schema.references), "__schema__.proto": schema.schema}
        for name, text in files.items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        out = os.path.join(tmp, "set.pb")
        code = protoc.main(
            ["protoc", f"-I{tmp}", f"-I{include}", "--include_imports", f"--descriptor_set_out={out}",
             "__schema__.proto"]
        )  # fmt: skip
        if code != 0 or not os.path.exists(out):
            raise ProtobufSchemaError(f"Protobuf schema {schema.schema_id} does not compile")
        with open(out, "rb") as fh:
            fds = descriptor_pb2.FileDescriptorSet.FromString(fh.read())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in fds.file:
        pool.Add(file_proto)
    return pool.FindFileByName("__schema__.proto")


def descriptor_to_arrow(desc: Descriptor) -> pa.DataType:
    return _message_type(desc, ())


def _message_type(desc: Descriptor, seen: tuple[str, ...]) -> pa.DataType:
    if desc.full_name == _TIMESTAMP:
        return pa.timestamp("us", "UTC")
    if desc.full_name in seen:
        raise ProtobufSchemaError(f"recursive message {desc.full_name} cannot become a table column")
    return pa.struct([pa.field(f.name, _field_type(f, (*seen, desc.full_name))) for f in desc.fields])


def _is_repeated(f: FieldDescriptor) -> bool:
    repeated = getattr(f, "is_repeated", None)  # protobuf >= 6 (upb) dropped ``label``
    if repeated is None:
        return bool(f.label == FieldDescriptor.LABEL_REPEATED)
    return bool(repeated)


def _field_type(f: FieldDescriptor, seen: tuple[str, ...]) -> pa.DataType:
    if _is_repeated(f) and f.message_type is not None and f.message_type.GetOptions().map_entry:
        value_field = f.message_type.fields_by_name["value"]
        return pa.map_(pa.string(), _single_type(value_field, seen))
    inner = _single_type(f, seen)
    return pa.list_(inner) if _is_repeated(f) else inner


def _single_type(f: FieldDescriptor, seen: tuple[str, ...]) -> pa.DataType:
    if f.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        return _message_type(f.message_type, seen)
    if f.type == FieldDescriptor.TYPE_ENUM:
        return pa.string()
    return _SCALARS[f.type]


def _converter(desc: Descriptor) -> Callable[[Any], Any]:
    """Message -> dict of Arrow-ready Python values, specialised per field once."""
    if desc.full_name == _TIMESTAMP:
        return lambda m: m.seconds * 1_000_000 + m.nanos // 1000
    plan: list[tuple[str, Callable[[Any], Any] | None, bool, Callable[[Any], bool] | None]] = []
    for f in desc.fields:
        conv = _value_converter(f)
        has_presence = f.type == FieldDescriptor.TYPE_MESSAGE and not _is_repeated(f)
        plan.append((f.name, conv, has_presence, None))

    def convert(message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, conv, presence, _ in plan:
            if presence and not message.HasField(name):
                out[name] = None
                continue
            value = getattr(message, name)
            out[name] = conv(value) if conv is not None else value
        return out

    return convert


def _value_converter(f: FieldDescriptor) -> Callable[[Any], Any] | None:
    repeated = _is_repeated(f)
    if repeated and f.message_type is not None and f.message_type.GetOptions().map_entry:
        value_conv = _value_converter(f.message_type.fields_by_name["value"])
        if value_conv is None:
            return lambda m: {str(k): v for k, v in m.items()}
        return lambda m: {str(k): value_conv(v) for k, v in m.items()}
    single: Callable[[Any], Any] | None
    if f.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        single = _converter(f.message_type)
    elif f.type == FieldDescriptor.TYPE_ENUM:
        names = {v.number: v.name for v in f.enum_type.values}
        single = lambda n: names.get(n, str(n))  # noqa: E731 — unknown numbers keep their number
    elif f.type in _UNSIGNED_64:
        single = lambda n: n - (1 << 64) if n >= 1 << 63 else n  # noqa: E731
    else:
        single = None
    if repeated:
        if single is None:
            return list
        conv = single
        return lambda items: [conv(x) for x in items]
    return single


class ProtobufDecoder:
    """Decodes serialized Protobuf messages (no wire-format header) of one message type."""

    def __init__(self, desc: Descriptor) -> None:
        self.arrow_type: pa.DataType = descriptor_to_arrow(desc)
        self.is_record = True
        self._cls = message_factory.GetMessageClass(desc)
        self._convert = _converter(desc)

    def decode(self, payloads: Sequence[bytes | memoryview | None]) -> tuple[pa.Array, dict[int, str]]:
        cls = self._cls
        convert = self._convert
        values: list[Any] = []
        failures: dict[int, str] = {}
        for i, payload in enumerate(payloads):
            if payload is None:
                values.append(None)
                continue
            try:
                message = cls.FromString(bytes(payload))
                values.append(convert(message))
            except Exception as exc:  # DecodeError, RuntimeWarning-as-error, UnicodeDecodeError…
                failures[i] = f"invalid Protobuf: {type(exc).__name__}: {exc}"
                values.append(None)
        return values_to_array(values, self.arrow_type, self.arrow_type, failures), failures
