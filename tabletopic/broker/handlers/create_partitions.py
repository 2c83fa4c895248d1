"""CreatePartitions (37): grow a topic (never shrink).

A partition has one replica, its leader (the data lives in shared object storage), and Metadata
reports it so (replicas and ISR both the leader, as AutoMQ does). An explicit replica assignment is
therefore honoured only when it says what will happen anyway: one broker per new partition, on a
single node that broker. Anything else is refused with INVALID_REPLICA_ASSIGNMENT, as Kafka refuses
an assignment it cannot carry out, instead of succeeding and leaving a client to wait for replicas
that never appear. In a cluster the controller places new partitions; AlterPartitionReassignments
moves one afterwards.

The new count is in this broker's registry before the answer goes out (``TopicRegistry``); the
other brokers of a cluster reload it on the change notification.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from tabletopic.broker.protocol.responses import CreatePartitionsResponse, CreatePartitionsTopicResult
from tabletopic.broker.topics import TopicError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


def check_assignments(broker: BrokerService, ctx: RequestContext, wanted: CreatePartitionsTopic) -> None:
    """Raises TopicError(INVALID_REPLICA_ASSIGNMENT) for an assignment this broker cannot honour
    (Kafka's messages where Kafka has one)."""
    topic = broker.topics.get(wanted.name)
    if wanted.assignments is None or topic is None or wanted.count <= topic.partition_count:
        return  # nothing assigned, or add_partitions refuses the request for its own reason
    assignments: Sequence[CreatePartitionsAssignment] = wanted.assignments
    added = wanted.count - topic.partition_count
    if len(assignments) != added:
        raise TopicError(
            ErrorCode.invalid_replica_assignment,
            f"Increasing the number of partitions by {added} but {len(assignments)} assignments provided.",
        )
    live = {b.node_id for b in broker.leadership.brokers(ctx.listener)}
    for index, assignment in enumerate(assignments, start=topic.partition_count):
        ids = [int(b) for b in assignment.broker_ids]
        unknown = sorted(set(ids) - live)
        if unknown:
            raise TopicError(
                ErrorCode.invalid_replica_assignment, f"Unknown broker(s) in replica assignment: {unknown}."
            )
        if len(ids) != 1:
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                f"partition {index} is assigned {len(ids)} replicas: a partition has one replica here, "
                "its leader (the data lives in shared object storage); assign one broker",
            )
        if len(live) > 1:
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                "the controller places new partitions: create them without an assignment and move "
                "one with AlterPartitionReassignments",
            )


async def handle(
    broker: BrokerService, ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    results: list[CreatePartitionsTopicResult] = []
    for wanted in request.topics:
        try:
            check_assignments(broker, ctx, wanted)
            await broker.topics.add_partitions(wanted.name, wanted.count, validate_only=request.validate_only)
            results.append({"name": wanted.name, "error_code": ErrorCode.none, "error_message": None})
        except TopicError as exc:
            results.append({"name": wanted.name, "error_code": exc.error_code, "error_message": str(exc)})
    return {"throttle_time": 0, "results": results}
