"""OffsetDelete (47): drop a group's committed offsets of topics it no longer subscribes to."""

from __future__ import annotations

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.protocol.messages.offset_commit import OffsetDeleteRequest
from tabletopic.broker.protocol.responses import OffsetDeleteResponse


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    error, results = await coordinator.delete_offsets(
        request.group_id,
        [(t.name, [int(p.partition_index) for p in t.partitions]) for t in request.topics],
    )
    return {
        "error_code": error,
        "throttle_time": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "error_code": e} for p, e in partitions]}
            for topic, partitions in results
        ],
    }
