"""The Protobuf plug-in object the registry loads (``schemaType`` "PROTOBUF")."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from tabletopic.schema_registry.formats.base import Incompatibility, InvalidSchema, ParsedSchema
from tabletopic.schema_registry.formats.protobuf.compatibility import check_compatibility
from tabletopic.schema_registry.formats.protobuf.schema import ParsedProtobufSchema, parse

_log = logging.getLogger(__name__)


class ProtobufFormat:
    """proto2/proto3 ``.proto`` text or base64 ``FileDescriptorProto``; imports by reference name."""

    schema_type = "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedProtobufSchema:
        """Compile ``text``; ``references`` maps import paths to the imported schemas' texts.

        Raises:
            InvalidSchema: for any defect, never another exception type.
        """
        try:
            return parse(text, references)
        except InvalidSchema:
            raise
        except Exception as exc:  # the registry promises 42201 for bad input, never a 500
            raise InvalidSchema(f"invalid Protobuf schema: {exc}") from exc

    def reader_can_read(self, reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
        """Reasons bytes written with ``writer`` may be misread by ``reader``; empty when compatible."""
        if not isinstance(reader, ParsedProtobufSchema) or not isinstance(writer, ParsedProtobufSchema):
            message = f"cannot compare {reader.schema_type} with {writer.schema_type}"
            return [Incompatibility("SCHEMA_TYPE_CHANGED", "#/", message)]
        try:
            return check_compatibility(reader, writer)
        except Exception as exc:
            # A defect in a rule must not turn a registration into a 500: answer "incompatible"
            # (the safe side) with the reason, and leave the traceback in the log.
            _log.exception("Protobuf compatibility check failed")
            return [
                Incompatibility("COMPATIBILITY_CHECK_FAILED", "#/", f"the check could not complete: {exc}")
            ]


FORMAT = ProtobufFormat()
