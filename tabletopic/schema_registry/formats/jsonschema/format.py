"""The JSON Schema plug-in object the registry loads (``schemaType`` "JSON"): drafts 4, 6, 7,
2019-09 and 2020-12 (draft 7 when ``$schema`` is absent); ``$ref`` names resolve through the
registered references."""

from __future__ import annotations

from tabletopic.schema_registry.formats.base import GuardedFormat, SchemaType
from tabletopic.schema_registry.formats.jsonschema.compatibility import check_compatibility
from tabletopic.schema_registry.formats.jsonschema.schema import ParsedJsonSchema, parse

FORMAT = GuardedFormat(SchemaType.JSON, "JSON", ParsedJsonSchema, parse, check_compatibility, root="#")
