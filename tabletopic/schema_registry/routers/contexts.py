"""``/contexts``: schema contexts are not supported, so only the default context ``.`` exists."""

from __future__ import annotations

from tabletopic.schema_registry.routers.deps import RegistryRouter

router = RegistryRouter(prefix="/contexts", tags=["contexts"])


@router.get("")
async def contexts() -> list[str]:
    return ["."]
