"""``/schemas``: schemas by global id, their subjects and versions, the type list, a listing."""

from __future__ import annotations

from typing import Any

from fastapi import Response

from tabletopic.schema_registry.contexts import public_id
from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.formats.loader import available_types
from tabletopic.schema_registry.model import guid_of
from tabletopic.schema_registry.routers.deps import Registry, RegistryRouter, SubjectPrefix
from tabletopic.schema_registry.routers.models import CONTENT_TYPE, schema_fields

router = RegistryRouter(prefix="/schemas", tags=["schemas"])

MAX_ID = 2**31 - 1


def _id(raw: str) -> int:
    # Confluent answers a malformed id like a missing one.
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 1 <= value <= MAX_ID:
        raise RegistryError(ErrorCode.SCHEMA_NOT_FOUND, f"Schema {raw[:40]} not found")
    return value


@router.get("/ids/{schema_id}")
def get_schema(
    registry: Registry,
    schema_id: str,
    subject: str | None = None,
    format: str | None = None,
    fetchMaxId: bool = False,
    includeSubjects: bool = False,
) -> dict[str, Any]:
    number = _id(schema_id)
    row = registry.schema(number, subject)
    body = schema_fields(row.schema_type, registry.formatted(row, format), row.references, row.contract)
    if includeSubjects:
        # Karapace's parameter: its REST proxy asks for the subjects with the schema and checks
        # the topic's subject is among them before producing with an id.
        body["subjects"] = registry.subjects_of(number, False, subject)
    if fetchMaxId:
        body["maxId"] = registry.max_id()
    return body


@router.get("/ids/{schema_id}/schema")
def get_schema_text(
    registry: Registry, schema_id: str, format: str | None = None, subject: str | None = None
) -> Response:
    row = registry.schema(_id(schema_id), subject)
    return Response(registry.formatted(row, format), media_type=CONTENT_TYPE)


@router.get("/ids/{schema_id}/subjects")
def get_schema_subjects(
    registry: Registry, schema_id: str, deleted: bool = False, subject: str | None = None
) -> list[str]:
    return registry.subjects_of(_id(schema_id), deleted, subject)


@router.get("/ids/{schema_id}/versions")
def get_schema_versions(
    registry: Registry, schema_id: str, deleted: bool = False, subject: str | None = None
) -> list[dict[str, Any]]:
    found = registry.versions_of(_id(schema_id), deleted, subject)
    return [{"subject": r.subject, "version": r.version} for r in found]


@router.get("/guids/{guid}")
def get_schema_by_guid(registry: Registry, guid: str, format: str | None = None) -> dict[str, Any]:
    row = registry.schema_by_guid(guid)
    return {
        **schema_fields(row.schema_type, registry.formatted(row, format), row.references, row.contract),
        "guid": guid_of(registry.fingerprint_of(row)),
    }


@router.get("/guids/{guid}/ids")
def get_ids_by_guid(registry: Registry, guid: str) -> list[dict[str, Any]]:
    row = registry.schema_by_guid(guid)
    return [{"context": registry.context_of_key(row.id), "id": public_id(row.id)}]


@router.get("/types")
async def get_types() -> list[str]:
    return available_types()


@router.get("")
def list_schemas(
    registry: Registry,
    subjectPrefix: SubjectPrefix,
    deleted: bool = False,
    latestOnly: bool = False,
    offset: int = 0,
    limit: int = -1,
) -> list[dict[str, Any]]:
    found = registry.listing(subjectPrefix, deleted, latestOnly)
    found = found[max(offset, 0) :]
    if limit > 0:
        found = found[:limit]
    return [
        {
            "subject": sv.subject,
            "version": sv.version,
            "id": public_id(sv.schema.id),
            **schema_fields(
                sv.schema.schema_type, sv.schema.schema, sv.schema.references, sv.schema.contract
            ),
        }
        for sv in found
    ]
