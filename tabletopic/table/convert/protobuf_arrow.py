"""Map a Protobuf message type to an Arrow schema, for the table pipeline.

Nested messages become structs, ``repeated`` lists, map fields maps, enums strings (the value
name). Well-known types map to what they mean rather than to their structure: ``Timestamp`` to a
UTC microsecond timestamp, the wrappers (``Int64Value``…) to nullable scalars, ``Duration`` to
int64 microseconds (Iceberg has no duration type), ``Struct``/``Value``/``ListValue`` to their
JSON text. A message that contains itself cannot be a column type, so its recursive occurrence
becomes JSON text too.

Unsigned 64-bit values have no Iceberg type: by default they are stored as int64 with the same
bits (values from 2**63 read back negative); ``uint64_as="decimal"`` stores decimal(20, 0) instead.

A field is nullable only when protobuf tracks its presence (messages, ``optional``, oneof members,
proto2 fields): a plain proto3 scalar is never missing, it reads as its default value.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
from google.protobuf import descriptor
from google.protobuf.descriptor import FieldDescriptor as FD

from tabletopic.schema_registry.formats.protobuf.fields import has_presence, is_repeated, is_required

JSON_TEXT = pa.string()
FIELD_NUMBER_KEY = b"protobuf.field_number"

_WRAPPERS: dict[str, pa.DataType] = {
    "google.protobuf.DoubleValue": pa.float64(),
    "google.protobuf.FloatValue": pa.float32(),
    "google.protobuf.Int64Value": pa.int64(),
    "google.protobuf.UInt64Value": pa.int64(),
    "google.protobuf.Int32Value": pa.int32(),
    "google.protobuf.UInt32Value": pa.int64(),
    "google.protobuf.BoolValue": pa.bool_(),
    "google.protobuf.StringValue": pa.string(),
    "google.protobuf.BytesValue": pa.binary(),
}
_WELL_KNOWN: dict[str, pa.DataType] = {
    "google.protobuf.Timestamp": pa.timestamp("us", tz="UTC"),
    "google.protobuf.Duration": pa.int64(),
    "google.protobuf.Struct": JSON_TEXT,
    "google.protobuf.Value": JSON_TEXT,
    "google.protobuf.ListValue": JSON_TEXT,
    "google.protobuf.FieldMask": pa.string(),
    "google.protobuf.Empty": pa.bool_(),
}


def protobuf_to_arrow(
    message: descriptor.Descriptor, *, uint64_as: Literal["int64", "decimal"] = "int64"
) -> pa.Schema:
    """One column per field of ``message`` (oneof members each get their own nullable column)."""
    mapper = _Mapper(uint64_as)
    return pa.schema(mapper.fields(message, (message.full_name,)))


class _Mapper:
    def __init__(self, uint64_as: str) -> None:
        self.uint64 = pa.decimal128(20, 0) if uint64_as == "decimal" else pa.int64()

    def fields(self, message: descriptor.Descriptor, ancestry: tuple[str, ...]) -> list[pa.Field]:
        return [self.field(f, ancestry) for f in message.fields]

    def field(self, fld: FD, ancestry: tuple[str, ...]) -> pa.Field:
        metadata = {FIELD_NUMBER_KEY: str(fld.number).encode()}
        if _is_map(fld):
            entry = fld.message_type
            key = self.value_type(entry.fields_by_number[1], ancestry)
            value_field = entry.fields_by_number[2]
            value = self.value_type(value_field, ancestry)
            data_type = pa.map_(key, pa.field("value", value, nullable=value_field.type == FD.TYPE_MESSAGE))
            return pa.field(fld.name, data_type, nullable=False, metadata=metadata)
        element = self.value_type(fld, ancestry)
        if is_repeated(fld):
            return pa.field(
                fld.name,
                pa.list_(pa.field("element", element, nullable=False)),
                nullable=False,
                metadata=metadata,
            )
        nullable = has_presence(fld) and not is_required(fld)
        return pa.field(fld.name, element, nullable=nullable, metadata=metadata)

    def value_type(self, fld: FD, ancestry: tuple[str, ...]) -> pa.DataType:
        kind = fld.type
        if kind in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
            return self.message_type(fld.message_type, ancestry)
        if kind == FD.TYPE_ENUM:
            return pa.string()
        if kind in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
            return self.uint64
        return _SCALARS[kind]

    def message_type(self, message: descriptor.Descriptor, ancestry: tuple[str, ...]) -> pa.DataType:
        name = message.full_name
        if name in _WRAPPERS:
            return self.uint64 if name == "google.protobuf.UInt64Value" else _WRAPPERS[name]
        if name in _WELL_KNOWN:
            return _WELL_KNOWN[name]
        if name in ancestry:
            return JSON_TEXT
        fields = self.fields(message, (*ancestry, name))
        if not fields:
            return pa.bool_()  # Parquet cannot store an empty struct; keep presence only
        return pa.struct(fields)


_SCALARS: dict[int, pa.DataType] = {
    FD.TYPE_DOUBLE: pa.float64(),
    FD.TYPE_FLOAT: pa.float32(),
    FD.TYPE_INT64: pa.int64(),
    FD.TYPE_SINT64: pa.int64(),
    FD.TYPE_SFIXED64: pa.int64(),
    FD.TYPE_INT32: pa.int32(),
    FD.TYPE_SINT32: pa.int32(),
    FD.TYPE_SFIXED32: pa.int32(),
    FD.TYPE_UINT32: pa.int64(),
    FD.TYPE_FIXED32: pa.int64(),
    FD.TYPE_BOOL: pa.bool_(),
    FD.TYPE_STRING: pa.string(),
    FD.TYPE_BYTES: pa.binary(),
}


def _is_map(fld: FD) -> bool:
    return (
        fld.type == FD.TYPE_MESSAGE
        and is_repeated(fld)
        and fld.message_type is not None
        and fld.message_type.GetOptions().map_entry
    )
