"""DeleteGroups (42): delete empty groups and their committed offsets."""

from __future__ import annotations

from typing import Any

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator


async def handle(coordinator: GroupCoordinator, ctx: RequestContext, request: Any) -> dict[str, Any]:
    results = await coordinator.delete_groups(request.groups_names)
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code": results[g]} for g in dict.fromkeys(request.groups_names)],
    }
