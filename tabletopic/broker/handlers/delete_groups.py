"""DeleteGroups (42): delete empty groups and their committed offsets (a share group: its
share-partition state)."""

from __future__ import annotations

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.protocol.messages.groups import DeleteGroupsRequest
from tabletopic.broker.protocol.responses import DeleteGroupsResponse


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(request.groups_names))
    shares = [
        g for g in names if coordinator.consumer.refusal(g) is None and await coordinator.share.exists(g)
    ]
    results = await coordinator.delete_groups([g for g in names if g not in shares])
    for group_id in shares:
        results[group_id] = await coordinator.share.delete_group(group_id)
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code": results[g]} for g in dict.fromkeys(request.groups_names)],
    }
