"""``/associations``: confluent-kafka >= 2.14 serializers ask here first and fall back to
``{topic}-value`` on a 404; any other answer breaks them. Associations are not stored, so every lookup
misses."""

from __future__ import annotations

from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.routers.deps import RegistryRouter

router = RegistryRouter(prefix="/associations", tags=["associations"])


@router.get("/resources/{namespace}/{resource}")
async def associations(namespace: str, resource: str) -> None:
    raise RegistryError(ErrorCode.SUBJECT_NOT_FOUND, f"No associations found for resource '{resource}'")
