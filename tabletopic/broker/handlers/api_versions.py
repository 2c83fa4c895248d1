"""ApiVersions (18): the API keys and version ranges this broker serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.responses import ApiVersionsResponse

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(broker: BrokerService, ctx: RequestContext, request: object) -> ApiVersionsResponse:
    """Reads nothing of the request: the client software name and version (v3 on) are not kept."""
    return {
        "error_code": ErrorCode.none,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high} for key, low, high in broker.api_ranges
        ],
        "throttle_time": 0,
    }
