"""OffsetCommit (8): store a group's consumed positions durably before answering.

v10 names topics by id only; this coordinator knows names, so such topics are unknown (the broker
advertises OffsetCommit up to v9).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator, OffsetToCommit


async def handle(coordinator: GroupCoordinator, ctx: RequestContext, request: Any) -> dict[str, Any]:
    offsets = [
        OffsetToCommit(
            topic=topic.name,
            partition=int(p.partition_index),
            offset=int(p.committed_offset),
            leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
            metadata=p.committed_metadata,
        )
        for topic in request.topics
        if getattr(topic, "name", None) is not None
        for p in topic.partitions
    ]
    results = await coordinator.commit_offsets(
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        int(request.generation_id_or_member_epoch),
        offsets,
    )
    topics = []
    for topic in request.topics:
        name = getattr(topic, "name", None)
        topics.append(
            {
                "name": name,
                "topic_id": getattr(topic, "topic_id", None),
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.unknown_topic_id
                        if name is None
                        else results[(name, int(p.partition_index))],
                    }
                    for p in topic.partitions
                ],
            }
        )
    return {"throttle_time": 0, "topics": topics}
