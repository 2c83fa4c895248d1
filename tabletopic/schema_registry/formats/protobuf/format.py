"""The Protobuf plug-in object the registry loads (``schemaType`` "PROTOBUF"): proto2/proto3
``.proto`` text or base64 ``FileDescriptorProto``; imports resolve by reference name."""

from __future__ import annotations

from tabletopic.schema_registry.formats.base import GuardedFormat, SchemaType
from tabletopic.schema_registry.formats.protobuf.compatibility import check_compatibility
from tabletopic.schema_registry.formats.protobuf.schema import ParsedProtobufSchema, parse

FORMAT = GuardedFormat(
    SchemaType.PROTOBUF, "Protobuf", ParsedProtobufSchema, parse, check_compatibility, root="#/"
)
