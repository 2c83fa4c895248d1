"""FindCoordinator (10): this broker coordinates every group and (key type 1) every transactional id.

v0-3 answer one coordinator at the top level; v4+ answer ``coordinators[]`` for the batched
``coordinator_keys``, a shape change one newest-shaped dict cannot express, hence the version check.
"""

from __future__ import annotations

from typing import TypedDict

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.protocol.messages.find_coordinator import (
    GROUP_KEY,
    TRANSACTION_KEY,
    FindCoordinatorRequest,
)
from tabletopic.broker.protocol.responses import FindCoordinatorResponse


class _Answer(TypedDict):
    """The fields of one coordinator: a v4+ ``coordinators[]`` entry's (with its key) or, before v4,
    the response's own."""

    error_code: ErrorCode
    error_message: str | None
    node_id: int
    host: str
    port: int


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    key_type = request.key_type

    def answer(key: str) -> _Answer:
        if key_type not in (GROUP_KEY, TRANSACTION_KEY):
            return {
                "error_code": ErrorCode.invalid_request,
                "error_message": f"unsupported coordinator key type {key_type}",
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "node_id": coordinator.node_id,
            "host": coordinator.host,
            "port": coordinator.port,
        }

    if ctx.api_version >= 4:
        return {
            "throttle_time": 0,
            "coordinators": [{"key": key, **answer(key)} for key in request.coordinator_keys],
        }
    one = answer(request.key)  # v0-3: one coordinator, at the top level
    return {
        "throttle_time": 0,
        "error_code": one["error_code"],
        "error_message": one["error_message"],
        "node_id": one["node_id"],
        "host": one["host"],
        "port": one["port"],
    }
