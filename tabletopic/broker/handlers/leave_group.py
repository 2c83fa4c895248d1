"""LeaveGroup (13): members leave without waiting for their session to time out.

Before v3 the request names one member and its error is the top-level one; v3+ batches members and
reports each one's error.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.model import MemberIdentity
from tabletopic.broker.protocol.messages.join_group import LeaveGroupRequest
from tabletopic.broker.protocol.responses import LeaveGroupResponse


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: LeaveGroupRequest
) -> LeaveGroupResponse:
    if ctx.api_version < 3:
        errors = await coordinator.leave_group(request.group_id, [MemberIdentity(request.member_id)])
        return {"throttle_time": 0, "error_code": errors[0], "members": []}
    identities = [MemberIdentity(m.member_id, m.group_instance_id, m.reason) for m in request.members]
    if not coordinator.ready:
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress, "members": []}
    errors = await coordinator.leave_group(request.group_id, identities)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "members": [
            {"member_id": i.member_id, "group_instance_id": i.group_instance_id, "error_code": error}
            for i, error in zip(identities, errors, strict=True)
        ],
    }
