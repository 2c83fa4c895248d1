"""``/``: the empty object Confluent answers, which clients and load balancers probe for liveness."""

from __future__ import annotations

from typing import Any

from tabletopic.schema_registry.routers.deps import RegistryRouter

router = RegistryRouter(tags=["root"])


@router.get("/")
async def root() -> dict[str, Any]:
    return {}
