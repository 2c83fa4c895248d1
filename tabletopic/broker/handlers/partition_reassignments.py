"""AlterPartitionReassignments (45) and ListPartitionReassignments (46).

Partitions live in shared object storage, not on replicas: a partition's only replica is its leader.
On one node the only valid assignment is that node and nothing is ever being reassigned. In a
cluster, reassigning a partition to ``[node]`` asks the controller to move its leadership there (no
data is copied: the new leader opens the stream with a newer epoch); ``replicas: null`` cancels a
move not yet made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import topic_with_partition, unknown_partition
from tabletopic.broker.protocol.messages.partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    ReassignablePartition,
)
from tabletopic.broker.protocol.responses import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


def _ok(index: int) -> ReassignablePartitionResponse:
    return {"partition_index": index, "error_code": ErrorCode.none, "error_message": None}


def _error(index: int, code: ErrorCode, message: str) -> ReassignablePartitionResponse:
    return {"partition_index": index, "error_code": code, "error_message": message}


def _check_partition(
    broker: BrokerService, topic: str, partition: ReassignablePartition, live: set[int]
) -> tuple[ReassignablePartitionResponse, tuple[str, int, int | None] | None]:
    """The partition's answer, and the move to ask for (None when there is nothing to do)."""
    index = partition.partition_index
    if topic_with_partition(broker, topic, index) is None:
        return {"partition_index": index, **unknown_partition(topic, index)}, None
    reassigning = broker.leadership.reassignments()
    if partition.replicas is None:
        if (topic, index) not in reassigning:
            message = "no reassignment is in progress"
            return _error(index, ErrorCode.no_reassignment_in_progress, message), None
        return _ok(index), (topic, index, None)
    replicas = list(partition.replicas)
    if not broker.clustered:
        if replicas != [broker.node_id]:
            message = f"the only replica of every partition is node {broker.node_id}"
            return _error(index, ErrorCode.invalid_replica_assignment, message), None
        return _ok(index), None
    if len(replicas) != 1 or replicas[0] not in live:
        message = (
            f"a partition has one replica, its leader, which must be a live broker ({sorted(live)}); "
            f"got {replicas}"
        )
        return _error(index, ErrorCode.invalid_replica_assignment, message), None
    return _ok(index), (topic, index, replicas[0])


async def handle_alter(
    broker: BrokerService, ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    live = {b.node_id for b in broker.leadership.brokers(ctx.listener)}
    responses: list[ReassignableTopicResponse] = []
    moves: list[tuple[str, int, int | None]] = []
    for t in request.topics:
        answers: list[ReassignablePartitionResponse] = []
        for p in t.partitions:
            answer, move = _check_partition(broker, t.name, p, live)
            answers.append(answer)
            if move is not None:
                moves.append(move)
        responses.append({"name": t.name, "partitions": answers})
    if moves:
        unknown = set(await broker.leadership.reassign(moves))
        for response in responses:
            for answer in response["partitions"]:
                if (response["name"], answer["partition_index"]) in unknown:
                    answer["error_code"] = ErrorCode.leader_not_available
                    answer["error_message"] = "the controller has not placed this partition yet"
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "responses": responses}


async def handle_list(
    broker: BrokerService, ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    moving = broker.leadership.reassignments()
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.name, int(i)) for t in request.topics for i in t.partition_indexes}
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for (topic, index), (current, target) in sorted(moving.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": index,
                "replicas": [target, current] if current >= 0 else [target],
                "adding_replicas": [target],
                "removing_replicas": [current] if current >= 0 else [],
            }
        )
    topics: list[OngoingTopicReassignment] = [
        {"name": name, "partitions": parts} for name, parts in by_topic.items()
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "topics": topics}
