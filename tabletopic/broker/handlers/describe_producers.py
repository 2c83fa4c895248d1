"""DescribeProducers (61): the idempotent producers the broker tracks per partition, with their
epoch, last acknowledged sequence and the start offset of their open transaction (what
``kafka-transactions.sh describe-producers`` shows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import topic_with_partition, unknown_partition
from tabletopic.broker.protocol.messages.describe_producers import DescribeProducersRequest
from tabletopic.broker.protocol.responses import DescribeProducersResponse, PartitionResponse, ProducerState

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


def _partition(broker: BrokerService, name: str, index: int) -> PartitionResponse:
    topic = topic_with_partition(broker, name, index)
    if topic is None:
        return {"partition_index": index, **unknown_partition(name, index), "active_producers": []}
    stream_id = topic.streams[index]
    open_txns = broker.transactions.partitions
    producers: list[ProducerState] = [
        {
            "producer_id": pid,
            "producer_epoch": epoch,
            "last_sequence": sequence,
            "last_timestamp": -1,
            "coordinator_epoch": -1,
            "current_txn_start_offset": _or_minus_one(open_txns.first_offset(stream_id, pid)),
        }
        for pid, epoch, sequence in broker.producers.active(stream_id)
    ]
    return {
        "partition_index": index,
        "error_code": ErrorCode.none,
        "error_message": None,
        "active_producers": producers,
    }


def _or_minus_one(value: int | None) -> int:
    return -1 if value is None else value


async def handle(
    broker: BrokerService, ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    return {
        "throttle_time": 0,
        "topics": [
            {"name": t.name, "partitions": [_partition(broker, t.name, i) for i in t.partition_indexes]}
            for t in request.topics
        ],
    }
