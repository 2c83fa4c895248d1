"""The format plug-in table: ``schemaType`` -> module implementing :class:`SchemaFormat`.

Modules are imported on first use, so a format whose module or dependency is missing only breaks
requests of that type (answered 42201 naming what to install), never the registry.
"""

from __future__ import annotations

import importlib
from functools import cache

from tabletopic.schema_registry.formats.base import InvalidSchema, SchemaFormat, SchemaType

DEFAULT_SCHEMA_TYPE = SchemaType.AVRO

# schemaType -> ("module:attribute", pip extra that provides the module's dependencies).
FORMATS: dict[str, tuple[str, str]] = {
    SchemaType.AVRO: ("tabletopic.schema_registry.formats.avro:FORMAT", "avro"),
    SchemaType.JSON: ("tabletopic.schema_registry.formats.jsonschema:FORMAT", "jsonschema"),
    SchemaType.PROTOBUF: ("tabletopic.schema_registry.formats.protobuf:FORMAT", "protobuf"),
}


class FormatUnavailable(InvalidSchema):
    """The schema type is unknown, or its module cannot be imported here."""


def get_format(schema_type: str | None) -> SchemaFormat:
    """The format for ``schema_type`` (``None`` means Avro, as in Confluent's API; any case).

    Raises:
        FormatUnavailable: unknown type, or its implementation failed to import.
    """
    return _load((schema_type or DEFAULT_SCHEMA_TYPE).upper())


@cache
def _load(name: str) -> SchemaFormat:
    # Cached per upper-cased name only (failures are not cached, so a module that lands later is
    # picked up); arbitrary request strings therefore never grow the cache.
    entry = FORMATS.get(name)
    if entry is None:
        shown = name if len(name) <= 40 else name[:37] + "..."
        raise FormatUnavailable(f"unknown schemaType {shown!r}; supported types are {', '.join(FORMATS)}")
    path, extra = entry
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise FormatUnavailable(
            f"schemaType {name} is not available on this node ({exc}); install the "
            f"'{extra}' dependencies (pip install {extra})"
        ) from exc
    fmt = getattr(module, attribute, None) or _discover(module, name)
    if fmt is None:
        raise FormatUnavailable(f"schemaType {name} is not available: {module_name} defines no {attribute}")
    return fmt


def forget_loaded() -> None:
    """Drop loaded formats so the next call imports again (tests that swap the table)."""
    _load.cache_clear()


def _discover(module: object, name: str) -> SchemaFormat | None:
    """Find the format object when a module does not export ``FORMAT``: the first attribute whose
    ``schema_type`` is ``name`` and that has ``parse``/``reader_can_read`` (a class is instantiated)."""
    for value in vars(module).values():
        if getattr(value, "schema_type", None) != name:
            continue
        methods = (getattr(value, "parse", None), getattr(value, "reader_can_read", None))
        if not all(callable(method) for method in methods):
            continue
        if isinstance(value, type):
            try:
                return value()  # type: ignore[no-any-return]
            except TypeError:
                continue
        return value  # type: ignore[no-any-return]
    return None


def available_types() -> list[str]:
    """Every schema type whose implementation loads on this node."""
    types = []
    for name in FORMATS:
        try:
            get_format(name)
        except FormatUnavailable:
            continue
        types.append(name)
    return types
