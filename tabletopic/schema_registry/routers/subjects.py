"""``/subjects``: registration, lookups, versions, references and deletes of one subject."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Response

from tabletopic.schema_registry.contexts import public_id
from tabletopic.schema_registry.model import SubjectVersion
from tabletopic.schema_registry.routers.deps import Registry, RegistryRouter, Subject, SubjectPrefix, Version
from tabletopic.schema_registry.routers.models import CONTENT_TYPE, SchemaBody, schema_fields

router = RegistryRouter(prefix="/subjects", tags=["subjects"])


def version_body(found: SubjectVersion, text: str | None = None) -> dict[str, Any]:
    row = found.schema
    return {
        "subject": found.subject,
        "version": found.version,
        "id": public_id(row.id),
        **schema_fields(row.schema_type, row.schema if text is None else text, row.references, row.contract),
    }


@router.get("")
def list_subjects(registry: Registry, subjectPrefix: SubjectPrefix, deleted: bool = False) -> list[str]:
    return registry.subjects(subjectPrefix, deleted)


@router.get("/{subject}/versions")
def list_versions(registry: Registry, subject: Subject, deleted: bool = False) -> list[int]:
    return registry.versions(subject, deleted)


@router.post("/{subject}/versions")
def register(
    registry: Registry, subject: Subject, body: SchemaBody, normalize: bool = False
) -> dict[str, Any]:
    schema_id, _version = registry.register(
        subject, body.submission(normalize), schema_id=body.id, version=body.version
    )
    return {"id": schema_id}


@router.post("/{subject}")
def lookup(
    registry: Registry, subject: Subject, body: SchemaBody, normalize: bool = False, deleted: bool = False
) -> dict[str, Any]:
    found = registry.lookup(subject, body.submission(normalize), deleted)
    return version_body(found)


@router.get("/{subject}/metadata")
def latest_with_metadata(
    registry: Registry,
    subject: Subject,
    key: Annotated[list[str] | None, Query()] = None,
    value: Annotated[list[str] | None, Query()] = None,
    deleted: bool = False,
    format: str | None = None,
) -> dict[str, Any]:
    """The newest version whose ``metadata.properties`` hold every ``key``/``value`` pair given
    (pairs matched by position, as Confluent does)."""
    wanted = dict(zip(key or [], value or [], strict=False))
    found = registry.latest_with_metadata(subject, wanted, deleted)
    return version_body(found, registry.formatted(found.schema, format))


@router.delete("/{subject}")
def delete_subject(registry: Registry, subject: Subject, permanent: bool = False) -> list[int]:
    return registry.delete_subject(subject, permanent)


@router.get("/{subject}/versions/{version}")
def get_version(
    registry: Registry, subject: Subject, version: Version, deleted: bool = False, format: str | None = None
) -> dict[str, Any]:
    found = registry.version(subject, version, deleted)
    return version_body(found, registry.formatted(found.schema, format))


@router.get("/{subject}/versions/{version}/schema")
def get_version_schema(
    registry: Registry, subject: Subject, version: Version, deleted: bool = False, format: str | None = None
) -> Response:
    found = registry.version(subject, version, deleted)
    return Response(registry.formatted(found.schema, format), media_type=CONTENT_TYPE)


@router.get("/{subject}/versions/{version}/referencedby")
def get_referenced_by(registry: Registry, subject: Subject, version: Version) -> list[int]:
    return registry.referenced_by(subject, version)


@router.delete("/{subject}/versions/{version}")
def delete_version(registry: Registry, subject: Subject, version: Version, permanent: bool = False) -> int:
    return registry.delete_version(subject, version, permanent)
