"""ElectLeaders (43): with one node every partition already has its preferred leader, so each
answers ELECTION_NOT_NEEDED, as Kafka does for a stable cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import topic_with_partition, unknown_partition
from tabletopic.broker.protocol.messages.elect_leaders import ElectLeadersRequest
from tabletopic.broker.protocol.responses import ElectLeadersResponse, PartitionResult

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


def _partition(broker: BrokerService, topic: str, partition: int) -> PartitionResult:
    if topic_with_partition(broker, topic, partition) is None:
        return {"partition_id": partition, **unknown_partition(topic, partition)}
    return {"partition_id": partition, "error_code": ErrorCode.election_not_needed, "error_message": None}


async def handle(
    broker: BrokerService, ctx: RequestContext, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    wanted = request.topic_partitions
    if wanted is None:  # all partitions
        wanted_pairs = [(t.name, list(range(t.partition_count))) for t in broker.topics.all()]
    else:
        wanted_pairs = [(t.topic, list(t.partitions)) for t in wanted]
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "replica_election_results": [
            {"topic": name, "partition_result": [_partition(broker, name, p) for p in partitions]}
            for name, partitions in wanted_pairs
        ],
    }
