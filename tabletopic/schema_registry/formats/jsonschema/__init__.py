"""JSON Schema format: parsing, canonical forms, compatibility, and the Arrow mapping."""

from tabletopic.schema_registry.formats.jsonschema.arrow import json_schema_to_arrow
from tabletopic.schema_registry.formats.jsonschema.compatibility import check_compatibility
from tabletopic.schema_registry.formats.jsonschema.format import FORMAT
from tabletopic.schema_registry.formats.jsonschema.schema import ParsedJsonSchema

__all__ = ["FORMAT", "ParsedJsonSchema", "check_compatibility", "json_schema_to_arrow"]
