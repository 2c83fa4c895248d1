"""JSON Schema format: parsing, canonical forms, compatibility."""

from tabletopic.schema_registry.formats.jsonschema.compatibility import check_compatibility
from tabletopic.schema_registry.formats.jsonschema.format import FORMAT
from tabletopic.schema_registry.formats.jsonschema.schema import ParsedJsonSchema

__all__ = ["FORMAT", "ParsedJsonSchema", "check_compatibility"]
