"""DescribeCluster (60): the live brokers and the controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(broker: BrokerService, ctx: RequestContext, request: object) -> dict[str, Any]:
    """The answer does not depend on the request: every field of it has a default answer here
    (all live brokers, no authorized operations)."""
    leadership = broker.leadership
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": broker.cluster_id,
        "controller_id": leadership.controller_id(),
        "brokers": [
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in leadership.brokers(ctx.listener)
        ],
        "cluster_authorized_operations": -2147483648,
    }
