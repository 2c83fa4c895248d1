"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92):
the share-partition start offsets of KIP-932 share groups, as an administrator sees and moves them.

A share group's "offset" of a partition is its share-partition start offset (SPSO); its lag is what
is still to be delivered from there to the log end. Altering or deleting needs the group to have no
members (NON_EMPTY_GROUP otherwise), as in Kafka: an altered partition starts over at the given
offset with nothing in flight; a deleted one starts again by ``share.auto.offset.reset``.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.share_partitions import lag
from tabletopic.broker.protocol.messages.share_groups import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
)
from tabletopic.broker.protocol.responses import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
)


async def _group_error(coordinator: GroupCoordinator, group_id: str, changes: bool) -> ErrorCode | None:
    """Why a group's offsets cannot be served (or changed) here, None when they can."""
    if (refused := coordinator.consumer.refusal(group_id)) is not None:
        return refused
    shares = coordinator.share
    if not await shares.exists(group_id):
        return ErrorCode.group_id_not_found
    group = shares.group(group_id)
    if changes and group is not None and group.members:
        return ErrorCode.non_empty_group
    return None


async def describe(
    coordinator: GroupCoordinator, ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    shares, topics = coordinator.share, coordinator.consumer.topics()
    groups: list[DescribeShareGroupOffsetsResponseGroup] = []
    for wanted in request.groups:
        if (error := await _group_error(coordinator, wanted.group_id, changes=False)) is not None:
            groups.append({"group_id": wanted.group_id, "topics": [], "error_code": error})
            continue
        states = {(k[1], k[2]): v for k, v in (await shares.partitions.stored(wanted.group_id)).items()}
        asked = (
            {(t.topic_name, int(p)) for t in wanted.topics for p in t.partitions}
            if wanted.topics is not None
            else set(states)
        )
        by_topic: dict[str, list[DescribeShareGroupOffsetsResponsePartition]] = {}
        for name, index in sorted(asked):
            state = states.get((name, index))
            entry: DescribeShareGroupOffsetsResponsePartition = {"partition_index": index, "leader_epoch": -1}
            if name not in topics:
                entry |= {"start_offset": -1, "error_code": ErrorCode.unknown_topic_or_partition}
            elif state is None:
                entry |= {"start_offset": -1, "lag": -1, "error_code": ErrorCode.none}
            else:
                behind = lag(state, shares.end_offset(name, index))
                entry |= {"start_offset": state.start_offset, "lag": behind, "error_code": ErrorCode.none}
            by_topic.setdefault(name, []).append(entry)
        groups.append(
            {
                "group_id": wanted.group_id,
                "error_code": ErrorCode.none,
                "topics": [
                    {
                        "topic_name": name,
                        "topic_id": topics[name][0] if name in topics else None,
                        "partitions": parts,
                    }
                    for name, parts in by_topic.items()
                ],
            }
        )
    return {"throttle_time": 0, "groups": groups}


async def alter(
    coordinator: GroupCoordinator, ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    group_id, topics = request.group_id, coordinator.consumer.topics()
    if (error := await _group_error(coordinator, group_id, changes=True)) is not None:
        return {"throttle_time": 0, "error_code": error, "responses": []}
    responses: list[AlterShareGroupOffsetsResponseTopic] = []
    for topic in request.topics:
        known = topics.get(topic.topic_name)
        partitions: list[AlterShareGroupOffsetsResponsePartition] = []
        for p in topic.partitions:
            index = int(p.partition_index)
            if known is None or not 0 <= index < known[1]:
                partitions.append(
                    {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition}
                )
                continue
            if p.start_offset < 0:
                partitions.append({"partition_index": index, "error_code": ErrorCode.invalid_request})
                continue
            await coordinator.share.partitions.reset((group_id, topic.topic_name, index), int(p.start_offset))
            partitions.append({"partition_index": index, "error_code": ErrorCode.none})
        responses.append(
            {
                "topic_name": topic.topic_name,
                "topic_id": known[0] if known else None,
                "partitions": partitions,
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses}


async def delete(
    coordinator: GroupCoordinator, ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    group_id, topics = request.group_id, coordinator.consumer.topics()
    if (error := await _group_error(coordinator, group_id, changes=True)) is not None:
        return {"throttle_time": 0, "error_code": error, "responses": []}
    stored = await coordinator.share.partitions.stored(group_id)
    responses: list[DeleteShareGroupOffsetsResponseTopic] = []
    for topic in request.topics:
        name = topic.topic_name
        known = topics.get(name)
        for key in [k for k in stored if k[1] == name]:
            await coordinator.share.partitions.reset(key, None)
        error = ErrorCode.none if known is not None else ErrorCode.unknown_topic_or_partition
        responses.append({"topic_name": name, "topic_id": known[0] if known else None, "error_code": error})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses}
