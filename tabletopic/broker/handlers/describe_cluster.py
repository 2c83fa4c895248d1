"""DescribeCluster (60): this node is the whole cluster and its controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    endpoint = broker.advertised_for(ctx)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [
            {"broker_id": broker.node_id, "host": endpoint.host, "port": endpoint.port, "rack": None}
        ],
        "cluster_authorized_operations": -2147483648,
    }
