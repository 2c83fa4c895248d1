"""Small endpoints clients probe: ``/``, ``/contexts``, ``/v1/metadata/*`` and ``/associations``."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.routers.deps import RegistryRouter

router = RegistryRouter(tags=["misc"])

VERSION = "7.6.0-tabletopic"


@router.get("/")
async def root() -> dict[str, Any]:
    return {}


@router.get("/contexts")
async def contexts() -> list[str]:
    return ["."]


@router.get("/v1/metadata/id")
async def metadata_id(request: Request) -> dict[str, Any]:
    cluster_id = getattr(request.app.state, "cluster_id", "tabletopic")
    return {
        "scope": {
            "path": [],
            "clusters": {
                "kafka-cluster": cluster_id,
                "schema-registry-cluster": "schema-registry",
            },
        }
    }


@router.get("/v1/metadata/version")
async def metadata_version() -> dict[str, str]:
    return {"version": VERSION, "commitId": "tabletopic"}


@router.get("/associations/resources/{namespace}/{resource}")
async def associations(namespace: str, resource: str) -> None:
    # confluent-kafka >= 2.14 serializers ask here first and fall back to {topic}-value on a 404;
    # any other answer breaks them. Associations are not stored, so every lookup misses.
    raise RegistryError(ErrorCode.SUBJECT_NOT_FOUND, f"No associations found for resource '{resource}'")
