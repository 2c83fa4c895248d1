"""Heartbeat (12): keeps a member's session alive and tells it when a rebalance started."""

from __future__ import annotations

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.protocol.messages.join_group import HeartbeatRequest
from tabletopic.broker.protocol.responses import HeartbeatResponse


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: HeartbeatRequest
) -> HeartbeatResponse:
    error = await coordinator.heartbeat(
        request.group_id,
        request.member_id,
        request.group_instance_id,
        int(request.generation_id),
    )
    return {"throttle_time": 0, "error_code": error}
