"""DescribeCluster (60): the live brokers and the controller."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.describe_cluster import BROKERS_ENDPOINT, NO_AUTHORIZED_OPERATIONS
from tabletopic.broker.protocol.responses import DescribeClusterResponse

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(broker: BrokerService, ctx: RequestContext, request: object) -> DescribeClusterResponse:
    """The answer does not depend on the request: every field of it has a default answer here
    (all live brokers, no authorized operations)."""
    leadership = broker.leadership
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": BROKERS_ENDPOINT,
        "cluster_id": broker.cluster_id,
        "controller_id": leadership.controller_id(),
        "brokers": [
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in leadership.brokers(ctx.listener)
        ],
        "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }
