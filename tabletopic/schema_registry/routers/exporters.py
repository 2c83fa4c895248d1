"""``/exporters``: schema linking (exporting subjects to another registry) is a Confluent Platform
feature this registry does not have. Every call answers 404 in Confluent's error shape with a
message saying so, instead of a bare unknown-route answer, so tools report a clear reason."""

from __future__ import annotations

from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.routers.deps import RegistryRouter

router = RegistryRouter(prefix="/exporters", tags=["exporters"])
METHODS = ["GET", "POST", "PUT", "DELETE"]


def _unsupported() -> None:
    raise RegistryError(
        ErrorCode.NOT_SUPPORTED, "HTTP 404 Not Found: schema exporters (schema linking) are not supported"
    )


@router.api_route("", methods=METHODS)
async def exporters() -> None:
    _unsupported()


@router.api_route("/{rest:path}", methods=METHODS)
async def exporter(rest: str) -> None:
    _unsupported()
