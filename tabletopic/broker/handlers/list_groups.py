"""ListGroups (16): every group of this coordinator, filtered by state and type (v4+/v5+)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator

# The only group type this coordinator runs (KIP-848 "consumer" groups are not served).
_GROUP_TYPE = "classic"


async def handle(coordinator: GroupCoordinator, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if not coordinator.ready:
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress, "groups": []}
    # Both filters match case-insensitively, as Kafka's do.
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    if types and _GROUP_TYPE not in types:
        return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": []}
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state.value,
                "group_type": _GROUP_TYPE,
            }
            for g in coordinator.list_groups()
            if not states or g.state.value.lower() in states
        ],
    }
