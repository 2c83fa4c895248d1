"""ListGroups (16): every group of this coordinator, filtered by state and type (v4+/v5+)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.protocol.messages.groups import ListGroupsRequest
from tabletopic.broker.protocol.responses import ListedGroup, ListGroupsResponse

_CLASSIC = "classic"
_CONSUMER = "consumer"  # KIP-848 groups
_SHARE = "share"  # KIP-932 groups


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: ListGroupsRequest
) -> ListGroupsResponse:
    if not coordinator.ready:
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress, "groups": []}
    # Both filters match case-insensitively, as Kafka's do.
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    # A KIP-848 group is listed as one (Empty once its members left) until the coordinator moves or
    # restarts; its offsets then keep it listed as an Empty classic group, as after a downgrade.
    consumer = {g.group_id: g for g in coordinator.consumer.groups() if coordinator.owns(g.group_id)}
    listed: list[ListedGroup] = [
        {"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state, "group_type": _CONSUMER}
        for g in consumer.values()
    ]
    listed += [
        {"group_id": g.group_id, "protocol_type": _SHARE, "group_state": g.state, "group_type": _SHARE}
        for g in coordinator.share.groups()
        if coordinator.owns(g.group_id)
    ]
    listed += [
        {
            "group_id": g.group_id,
            "protocol_type": g.protocol_type,
            "group_state": g.state.value,
            "group_type": _CLASSIC,
        }
        for g in coordinator.list_groups()
        if g.group_id not in consumer  # an Empty classic group holding a consumer group's offsets
    ]
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "groups": [
            g
            for g in listed
            if (not states or str(g["group_state"]).lower() in states)
            and (not types or g["group_type"] in types)
        ],
    }
