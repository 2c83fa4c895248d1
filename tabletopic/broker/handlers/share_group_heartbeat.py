"""ShareGroupHeartbeat (76): join, stay in and leave a KIP-932 share group.

The member id is the client's own (an empty one is INVALID_REQUEST, as in Kafka); topics travel
by id on the wire and by name in the group (:mod:`tabletopic.broker.groups.share_group`).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.share_group import ShareHeartbeat
from tabletopic.broker.handlers.consumer_group_heartbeat import wire_assignment
from tabletopic.broker.handlers.join_group import client_host
from tabletopic.broker.protocol.messages.share_groups import ShareGroupHeartbeatRequest
from tabletopic.broker.protocol.responses import ShareGroupHeartbeatResponse


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    shares = coordinator.share
    answer: ShareGroupHeartbeatResponse = {
        "throttle_time": 0,
        "member_id": request.member_id or None,
        "member_epoch": request.member_epoch,
        "heartbeat_interval": shares.settings.heartbeat_interval_ms,
        "assignment": None,
    }
    if not request.member_id:
        return answer | {
            "error_code": ErrorCode.invalid_request,
            "error_message": "the member id must not be empty",
        }
    if (refused := coordinator.consumer.refusal(request.group_id)) is not None:
        return answer | {"error_code": refused, "error_message": None}
    result = shares.heartbeat(
        request.group_id,
        ShareHeartbeat(
            member_id=request.member_id,
            member_epoch=int(request.member_epoch),
            rack_id=request.rack_id,
            subscribed_topic_names=None
            if request.subscribed_topic_names is None
            else tuple(str(t) for t in request.subscribed_topic_names),
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
        ),
    )
    assignment = None
    if result.assignment is not None and result.error is ErrorCode.none:
        assignment = wire_assignment(result.assignment, coordinator.consumer.topics())
    return answer | {
        "error_code": result.error,
        "error_message": result.message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "assignment": assignment,
    }
