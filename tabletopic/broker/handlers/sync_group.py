"""SyncGroup (14): the leader hands out assignments; every member waits for its own."""

from __future__ import annotations

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.model import SyncRequest
from tabletopic.broker.protocol.messages.join_group import SyncGroupRequest
from tabletopic.broker.protocol.responses import SyncGroupResponse


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: SyncGroupRequest
) -> SyncGroupResponse:
    result = await coordinator.sync_group(
        SyncRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            generation_id=int(request.generation_id),
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
            assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
        )
    )
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }
