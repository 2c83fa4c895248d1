"""Protobuf values to Arrow.

The type mapping is :func:`~tabletopic.table.convert.protobuf_arrow.protobuf_to_arrow`: nested
messages -> structs, repeated -> lists, maps -> maps, enums -> value names, ``Timestamp`` ->
timestamp(us, UTC), wrappers -> nullable scalars, ``Duration`` -> int64 micros,
``Struct``/``Value``/``ListValue`` and recursive occurrences -> JSON text, uint64 -> int64 bits.
This module produces Python values that fit that
mapping, with a converter specialised once per message type (walking the descriptor and the Arrow
type together), so a record costs one ``FromString`` plus attribute reads.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from tabletopic.schema_registry.formats.protobuf.fields import has_presence, is_repeated
from tabletopic.schema_registry.lookup import RegisteredSchema
from tabletopic.table.convert.arrowutil import decode_each, values_to_array
from tabletopic.table.convert.native_column import NativeFirstDecoder

FD = FieldDescriptor
_UNSIGNED_64 = {FD.TYPE_UINT64, FD.TYPE_FIXED64}
_WRAPPERS = {
    "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
    "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
    "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue",
}  # fmt: skip


class ProtobufSchemaError(ValueError):
    """The schema names no such message."""


def read_message_indexes(buf: bytes | memoryview, pos: int) -> tuple[tuple[int, ...], int]:
    """Confluent's message-index path after the schema id (``[0]`` for the ``0x00`` shorthand).
    Raises ValueError (the format module's MessageIndexError) on corrupt input."""
    from tabletopic.schema_registry.formats.protobuf import read_message_indexes as read

    indexes, pos = read(buf, pos)
    return tuple(indexes) or (0,), pos


def message_descriptor(
    schema: RegisteredSchema, indexes: Sequence[int] | None = None, full_name: str | None = None
) -> Descriptor:
    """The message named by ``indexes`` (wire format) or ``full_name`` (by_latest_schema's
    ``message.full.name``), defaulting to the schema's first message."""
    from tabletopic.schema_registry.formats.protobuf import message_descriptor_for

    first = message_descriptor_for(schema, list(indexes or (0,)))
    if full_name is None:
        return first
    try:
        return first.file.pool.FindMessageTypeByName(full_name)
    except KeyError:
        raise ProtobufSchemaError(f"schema {schema.schema_id} has no message {full_name!r}") from None


def message_arrow_type(desc: Descriptor) -> pa.StructType:
    from tabletopic.table.convert.protobuf_arrow import protobuf_to_arrow

    return pa.struct(list(protobuf_to_arrow(desc)))


def _message_converter(desc: Descriptor, type_: pa.DataType) -> Callable[[Any], Any]:
    """Message -> Python value of Arrow type ``type_`` (per the format module's mapping)."""
    name = desc.full_name
    if pa.types.is_string(type_) and name != "google.protobuf.StringValue":
        if name == "google.protobuf.FieldMask":
            return lambda m: ",".join(m.paths)
        return lambda m: json_format.MessageToJson(m, indent=None)
    if name == "google.protobuf.Timestamp":
        return lambda m: m.seconds * 1_000_000 + m.nanos // 1000
    if name == "google.protobuf.Duration":
        return lambda m: m.seconds * 1_000_000 + m.nanos // 1000
    if name in _WRAPPERS:
        fix = _scalar_fix(desc.fields_by_name["value"], type_)
        if fix is None:
            return lambda m: m.value
        return lambda m: fix(m.value)
    if not pa.types.is_struct(type_):
        return lambda m: True  # Empty and field-less messages: presence only
    plan: list[tuple[str, bool, Callable[[Any], Any] | None]] = []
    for i in range(type_.num_fields):
        arrow_field = type_.field(i)
        f = desc.fields_by_name[arrow_field.name]
        presence = has_presence(f) and not is_repeated(f)
        plan.append((f.name, presence, _field_converter(f, arrow_field.type)))

    def convert(message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field_name, presence, conv in plan:
            if presence and not message.HasField(field_name):
                out[field_name] = None
                continue
            value = getattr(message, field_name)
            out[field_name] = value if conv is None else conv(value)
        return out

    return convert


def _scalar_fix(f: FieldDescriptor, type_: pa.DataType) -> Callable[[Any], Any] | None:
    if f.type == FD.TYPE_ENUM:
        names = {v.number: v.name for v in f.enum_type.values}
        return lambda n: names.get(n, str(n))  # an unknown number keeps its number
    if f.type in _UNSIGNED_64:
        if pa.types.is_decimal(type_):
            return decimal.Decimal
        return lambda n: n - (1 << 64) if n >= 1 << 63 else n
    return None


def _field_converter(f: FieldDescriptor, type_: pa.DataType) -> Callable[[Any], Any] | None:
    repeated = is_repeated(f)
    if repeated and f.message_type is not None and f.message_type.GetOptions().map_entry:
        key_conv = _single(f.message_type.fields_by_number[1], type_.key_type)
        value_conv = _single(f.message_type.fields_by_number[2], type_.item_type)
        return lambda m: [
            (k if key_conv is None else key_conv(k), v if value_conv is None else value_conv(v))
            for k, v in m.items()
        ]
    if repeated:
        single = _single(f, type_.value_type)
        if single is None:
            return list
        return lambda items: [single(x) for x in items]
    return _single(f, type_)


def _single(f: FieldDescriptor, type_: pa.DataType) -> Callable[[Any], Any] | None:
    if f.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
        return _message_converter(f.message_type, type_)
    return _scalar_fix(f, type_)


class ProtobufDecoder(NativeFirstDecoder):
    """Decodes serialized Protobuf messages (no wire-format header) of one message type."""

    def __init__(self, desc: Descriptor, native: bool = True) -> None:
        self.arrow_type: pa.DataType = message_arrow_type(desc)
        self.is_record = True
        self._cls = message_factory.GetMessageClass(desc)
        self._convert = _message_converter(desc, self.arrow_type)
        if native:
            from tabletopic.table.convert.native_protobuf import compile_native

            # Whole columns in native code (~20x); a chunk it cannot decode comes back per record.
            self._native = compile_native(desc, self.arrow_type)

    def decode_per_record(
        self, payloads: Sequence[bytes | None], skip: int = 0
    ) -> tuple[pa.Array, dict[int, str]]:
        """One ``FromString`` per payload: slow, but it isolates each bad record."""
        from_string = self._cls.FromString
        convert = self._convert
        values, failures = decode_each(
            payloads,
            skip,
            lambda payload: convert(from_string(payload)),
            (Exception,),  # DecodeError, UnicodeDecodeError…
            lambda exc: f"invalid Protobuf: {type(exc).__name__}: {exc}",
        )
        return values_to_array(values, self.arrow_type, self.arrow_type, failures), failures
