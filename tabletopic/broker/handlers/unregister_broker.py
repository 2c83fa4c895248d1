"""UnregisterBroker (64), what `kafka-cluster unregister --id N` sends: remove a broker that left
the cluster for good, so Metadata, DescribeCluster, `cluster status` and the console stop listing
it. Kafka's controller removes any registered broker; here a broker that may still write (its
lease runs), still leads a partition or still has a shared WAL to take over is refused with
INVALID_REQUEST and a message saying why, because acknowledged data depends on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.unregister_broker import UnregisterBrokerRequest
from tabletopic.broker.protocol.responses import UnregisterBrokerResponse
from tabletopic.cluster.db import BrokerNotRegistered, UnregisterRefused

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(
    broker: BrokerService, ctx: RequestContext, request: UnregisterBrokerRequest
) -> UnregisterBrokerResponse:
    try:
        await broker.leadership.unregister(
            int(request.broker_id), by=f"UnregisterBroker from {ctx.principal}"
        )
    except BrokerNotRegistered as exc:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.broker_id_not_registered,
            "error_message": str(exc),
        }
    except UnregisterRefused as exc:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "error_message": str(exc)}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None}
