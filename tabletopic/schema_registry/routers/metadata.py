"""``/v1/metadata``: which clusters this registry belongs to, and its version."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from tabletopic.schema_registry.routers.deps import RegistryRouter

router = RegistryRouter(prefix="/v1/metadata", tags=["metadata"])

VERSION = "7.6.0-tabletopic"


@router.get("/id")
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


@router.get("/version")
async def metadata_version() -> dict[str, str]:
    return {"version": VERSION, "commitId": "tabletopic"}
