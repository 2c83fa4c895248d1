"""OffsetFetch (9): a group's committed positions.

v0-7 answer ``topics[]`` (and ``error_code``) at the top level for one group; v8+ answer
``groups[]``, a shape change one newest-shaped dict cannot express, hence the version check.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.store import CommittedOffset
from tabletopic.broker.protocol.messages.offset_commit import (
    BATCHED_FETCH_SINCE,
    OffsetFetchGroup,
    OffsetFetchRequest,
    OffsetFetchTopic,
)
from tabletopic.broker.protocol.responses import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponseTopics,
)


def _fetched_topics(
    fetched: Sequence[tuple[str, Sequence[tuple[int, CommittedOffset | None]]]], error: ErrorCode
) -> list[OffsetFetchResponseTopics]:
    # v8+'s groups[].topics[] type; it fits v0-7's top-level topics[] too, which lack only its topic_id.
    return [
        {
            "name": topic,
            "partitions": [
                {
                    "partition_index": partition,
                    "committed_offset": -1 if value is None else value.offset,
                    "committed_leader_epoch": -1 if value is None else value.leader_epoch,
                    # Kafka answers "" both for "no offset" and for a commit with null metadata.
                    "metadata": "" if value is None or value.metadata is None else value.metadata,
                    "error_code": error,
                }
                for partition, value in partitions
            ],
        }
        for topic, partitions in fetched
    ]


def _requested(topics: Sequence[OffsetFetchTopic] | None) -> list[tuple[str, Sequence[int]]] | None:
    if topics is None:
        return None  # v2+: null means every partition the group committed
    return [(t.name, [int(p) for p in t.partition_indexes]) for t in topics]


def check_member_epoch(coordinator: GroupCoordinator, group: OffsetFetchGroup) -> ErrorCode:
    """v9+: a member of a KIP-848 group fetches with its member id and epoch, checked as OffsetCommit
    checks them (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); without them (admin tools) anyone may."""
    member_id = group.member_id or ""
    epoch = int(group.member_epoch)
    consumer = coordinator.consumer.group(group.group_id)
    if consumer is None or not consumer.members or (not member_id and epoch < 0):
        return ErrorCode.none
    return consumer.check_offset_commit(member_id, epoch)


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    if ctx.api_version >= BATCHED_FETCH_SINCE:
        groups: list[OffsetFetchResponseGroup] = []
        for group in request.groups:
            error, fetched = coordinator.fetch_offsets(group.group_id, _requested(group.topics))
            if (
                error is ErrorCode.none
                and (stale := check_member_epoch(coordinator, group)) is not ErrorCode.none
            ):
                error, fetched = stale, []
            groups.append(
                {
                    "group_id": group.group_id,
                    "error_code": error,
                    "topics": _fetched_topics(fetched, ErrorCode.none),
                }
            )
        return {"throttle_time": 0, "groups": groups}
    requested = _requested(request.topics)
    error, fetched = coordinator.fetch_offsets(request.group_id, requested)
    if error is not ErrorCode.none and requested is not None:
        # v1 has no top-level error: report it on every requested partition as well.
        fetched = [(topic, [(p, None) for p in partitions]) for topic, partitions in requested]
    return {"throttle_time": 0, "error_code": error, "topics": _fetched_topics(fetched, error)}
