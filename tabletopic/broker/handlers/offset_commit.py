"""OffsetCommit (8): store a group's consumed positions durably before answering.

v10 names topics by id only; this coordinator knows names, so the broker advertises OffsetCommit up
to v9, every version of which names topics by name.
"""

from __future__ import annotations

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator, OffsetToCommit
from tabletopic.broker.protocol.messages.offset_commit import OffsetCommitRequest
from tabletopic.broker.protocol.responses import OffsetCommitResponse, OffsetCommitResponseTopic


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    offsets = [
        OffsetToCommit(
            topic=topic.name,
            partition=int(p.partition_index),
            offset=int(p.committed_offset),
            leader_epoch=int(p.committed_leader_epoch),
            metadata=p.committed_metadata,
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    results = await coordinator.commit_offsets(
        request.group_id,
        request.member_id,
        request.group_instance_id,
        int(request.generation_id_or_member_epoch),
        offsets,
    )
    topics: list[OffsetCommitResponseTopic] = [
        {
            "name": topic.name,
            "topic_id": None,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": results[(topic.name, int(p.partition_index))],
                }
                for p in topic.partitions
            ],
        }
        for topic in request.topics
    ]
    return {"throttle_time": 0, "topics": topics}
