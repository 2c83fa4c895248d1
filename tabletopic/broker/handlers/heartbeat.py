"""Heartbeat (12): keeps a member's session alive and tells it when a rebalance started."""

from __future__ import annotations

from typing import Any

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator


async def handle(coordinator: GroupCoordinator, ctx: RequestContext, request: Any) -> dict[str, Any]:
    error = await coordinator.heartbeat(
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        int(request.generation_id),
    )
    return {"throttle_time": 0, "error_code": error}
