"""Protobuf format: parsing (text or serialized descriptor), rendering, compatibility, wire framing."""

from tabletopic.schema_registry.formats.protobuf.compatibility import check_compatibility
from tabletopic.schema_registry.formats.protobuf.format import FORMAT
from tabletopic.schema_registry.formats.protobuf.schema import ParsedProtobufSchema
from tabletopic.schema_registry.formats.protobuf.wire import (
    MessageIndexError,
    message_descriptor_for,
    message_indexes_of,
    read_message_indexes,
    write_message_indexes,
)

__all__ = [
    "FORMAT",
    "MessageIndexError",
    "ParsedProtobufSchema",
    "check_compatibility",
    "message_descriptor_for",
    "message_indexes_of",
    "read_message_indexes",
    "write_message_indexes",
]
