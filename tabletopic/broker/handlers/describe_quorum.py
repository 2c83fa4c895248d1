"""DescribeQuorum (55): the metadata quorum is this node alone (the metadata lives in the
metadata database, not in a Raft log), reported the way a one-voter KRaft quorum is."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.describe_quorum import DescribeQuorumRequest
from tabletopic.broker.protocol.responses import DescribeQuorumResponse, ReplicaState

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(
    broker: BrokerService, ctx: RequestContext, request: DescribeQuorumRequest
) -> DescribeQuorumResponse:
    now = int(time.time() * 1000)
    voter: ReplicaState = {
        "replica_id": broker.node_id,
        "replica_directory_id": None,
        "log_end_offset": 0,
        "last_fetch_timestamp": now,
        "last_caught_up_timestamp": now,
    }
    endpoint = broker.advertised_for(ctx)
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "topics": [
            {
                "topic_name": t.topic_name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.none,
                        "error_message": None,
                        "leader_id": broker.node_id,
                        "leader_epoch": 1,
                        "high_watermark": 0,
                        "current_voters": [voter],
                        "observers": [],
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
        "nodes": [
            {
                "node_id": broker.node_id,
                "listeners": [{"name": endpoint.protocol, "host": endpoint.host, "port": endpoint.port}],
            }
        ],
    }
