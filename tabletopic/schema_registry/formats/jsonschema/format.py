"""The JSON Schema plug-in object the registry loads (``schemaType`` "JSON")."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from tabletopic.schema_registry.formats.base import Incompatibility, InvalidSchema, ParsedSchema
from tabletopic.schema_registry.formats.jsonschema.compatibility import check_compatibility
from tabletopic.schema_registry.formats.jsonschema.schema import ParsedJsonSchema, parse

_log = logging.getLogger(__name__)


class JsonSchemaFormat:
    """JSON Schema drafts 4, 6, 7, 2019-09 and 2020-12 (draft 7 when ``$schema`` is absent)."""

    schema_type = "JSON"

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedJsonSchema:
        """Parse and validate ``text``; ``references`` maps ``$ref`` names to schema texts.

        Raises:
            InvalidSchema: for any defect, never another exception type.
        """
        try:
            return parse(text, references)
        except InvalidSchema:
            raise
        except Exception as exc:  # the registry promises 42201 for bad input, never a 500
            raise InvalidSchema(f"invalid JSON schema: {exc}") from exc

    def reader_can_read(self, reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
        """Reasons data valid under ``writer`` may be rejected by ``reader``; empty when compatible."""
        if not isinstance(reader, ParsedJsonSchema) or not isinstance(writer, ParsedJsonSchema):
            return [
                Incompatibility(
                    "SCHEMA_TYPE_CHANGED",
                    "#",
                    f"cannot compare {reader.schema_type} with {writer.schema_type}",
                )
            ]
        try:
            return check_compatibility(reader, writer)
        except Exception as exc:
            # A defect in a rule must not turn a registration into a 500: answer "incompatible"
            # (the safe side) with the reason, and leave the traceback in the log.
            _log.exception("JSON Schema compatibility check failed")
            return [
                Incompatibility("COMPATIBILITY_CHECK_FAILED", "#", f"the check could not complete: {exc}")
            ]


FORMAT = JsonSchemaFormat()
