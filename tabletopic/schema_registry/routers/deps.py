"""What endpoints share: the registry from app state, subjects decoded from the raw path, versions.

Dependencies are ``async def`` on purpose: they do no I/O, and FastAPI would otherwise run each one
in the thread pool — a thread hop per dependency per request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Path, Request
from fastapi.datastructures import DefaultPlaceholder

from tabletopic.schema_registry.errors import ErrorCode, RegistryError, invalid_subject
from tabletopic.schema_registry.model import has_control_character, parse_version
from tabletopic.schema_registry.registry import SchemaRegistry


async def get_registry(request: Request) -> SchemaRegistry:
    registry: SchemaRegistry | None = getattr(request.app.state, "registry", None)
    if registry is None:  # pragma: no cover - the lifespan sets it before serving
        raise RegistryError(ErrorCode.STORE_ERROR, "schema registry is not started")
    return registry


Registry = Annotated[SchemaRegistry, Depends(get_registry)]


class RegistryRouter(APIRouter):
    """Routes answer plain JSON-able values: no response model is inferred from the return
    annotation, so FastAPI neither validates answers again nor does it in the thread pool."""

    def add_api_route(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if isinstance(kwargs.get("response_model"), DefaultPlaceholder):
            kwargs["response_model"] = None
        super().add_api_route(path, endpoint, **kwargs)


def escape_segment(raw_segment: str) -> str:
    """A raw path segment, decoded, with ``%`` and ``/`` kept escaped so routing sees one segment."""
    return unquote(raw_segment).replace("%", "%25").replace("/", "%2F")


def unescape_segment(segment: str) -> str:
    return segment.replace("%2F", "/").replace("%25", "%")


MAX_SUBJECT_LENGTH = 1024  # the width of the subject columns


def check_subject(name: str) -> str:
    """Refuse names no database column can hold, before they reach SQL (PostgreSQL rejects NUL
    characters outright; over-long names would fail as a store error instead of a client error)."""
    if not name.strip():
        raise invalid_subject(name, "subject names must not be empty")
    if len(name) > MAX_SUBJECT_LENGTH:
        raise invalid_subject(name, f"subject names are limited to {MAX_SUBJECT_LENGTH} characters")
    if has_control_character(name):
        raise invalid_subject(name, "subject names must not contain control characters")
    return name


async def _subject(subject: Annotated[str, Path()]) -> str:
    return check_subject(unescape_segment(subject))


async def _prefix(subjectPrefix: str = "") -> str:
    return check_subject(subjectPrefix) if subjectPrefix else ""


async def _version(version: Annotated[str, Path()]) -> int:
    return parse_version(version)


Subject = Annotated[str, Depends(_subject)]
SubjectPrefix = Annotated[str, Depends(_prefix)]
Version = Annotated[int, Depends(_version)]
