"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): partitions live in shared
object storage, not on replicas, so the only valid assignment is this node and nothing is ever
being reassigned."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import topic_with_partition, unknown_partition

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


def _alter_partition(broker: BrokerService, topic: str, partition: Any) -> dict[str, Any]:
    index = partition.partition_index
    if topic_with_partition(broker, topic, index) is None:
        return {"partition_index": index, **unknown_partition(topic, index)}
    if partition.replicas is None:
        return {
            "partition_index": index,
            "error_code": ErrorCode.no_reassignment_in_progress,
            "error_message": "no reassignment is in progress",
        }
    if list(partition.replicas) != [broker.node_id]:
        return {
            "partition_index": index,
            "error_code": ErrorCode.invalid_replica_assignment,
            "error_message": f"the only replica of every partition is node {broker.node_id}",
        }
    return {"partition_index": index, "error_code": ErrorCode.none, "error_message": None}


async def handle_alter(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "responses": [
            {"name": t.name, "partitions": [_alter_partition(broker, t.name, p) for p in t.partitions]}
            for t in request.topics
        ],
    }


async def handle_list(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "topics": []}
