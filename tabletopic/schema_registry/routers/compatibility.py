"""``/compatibility``: would this schema be accepted? (``verbose=true`` says why not)."""

from __future__ import annotations

from typing import Any

from tabletopic.schema_registry.model import encode_messages
from tabletopic.schema_registry.routers.deps import Registry, RegistryRouter, Subject, Version
from tabletopic.schema_registry.routers.models import SchemaBody

router = RegistryRouter(prefix="/compatibility", tags=["compatibility"])


def _answer(
    registry: Registry, subject: str, version: int | None, body: SchemaBody, normalize: bool, verbose: bool
) -> dict[str, Any]:
    failures, level = registry.test_compatibility(subject, version, body.submission(normalize))
    answer: dict[str, Any] = {"is_compatible": not failures}
    if verbose:
        answer["messages"] = encode_messages(failures, level)
    return answer


@router.post("/subjects/{subject}/versions/{version}")
def check_version(
    registry: Registry,
    subject: Subject,
    version: Version,
    body: SchemaBody,
    verbose: bool = False,
    normalize: bool = False,
) -> dict[str, Any]:
    return _answer(registry, subject, version, body, normalize, verbose)


@router.post("/subjects/{subject}/versions")
def check_all(
    registry: Registry, subject: Subject, body: SchemaBody, verbose: bool = False, normalize: bool = False
) -> dict[str, Any]:
    return _answer(registry, subject, None, body, normalize, verbose)
