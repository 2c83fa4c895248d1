"""What endpoints share: the registry from app state, subjects decoded from the raw path, versions."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote

from fastapi import Depends, Path, Request

from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.registry import SchemaRegistry, parse_version


def get_registry(request: Request) -> SchemaRegistry:
    registry: SchemaRegistry | None = getattr(request.app.state, "registry", None)
    if registry is None:  # pragma: no cover - the lifespan sets it before serving
        raise RegistryError(ErrorCode.STORE_ERROR, "schema registry is not started")
    return registry


Registry = Annotated[SchemaRegistry, Depends(get_registry)]


def escape_segment(raw_segment: str) -> str:
    """A raw path segment, decoded, with ``%`` and ``/`` kept escaped so routing sees one segment."""
    return unquote(raw_segment).replace("%", "%25").replace("/", "%2F")


def unescape_segment(segment: str) -> str:
    return segment.replace("%2F", "/").replace("%25", "%")


def _subject(subject: Annotated[str, Path()]) -> str:
    name = unescape_segment(subject)
    if not name.strip():
        raise RegistryError(ErrorCode.SUBJECT_NOT_FOUND, f"Subject '{name}' not found.")
    return name


def _version(version: Annotated[str, Path()]) -> int:
    return parse_version(version)


Subject = Annotated[str, Depends(_subject)]
Version = Annotated[int, Depends(_version)]
