"""InitProducerId (22): producer ids for idempotent producers (librdkafka's and kafka-python's
default). Transactions are not supported, so a transactional id is refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import field

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

MAX_EPOCH = 32767


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if request.transactional_id:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.transactional_id_authorization_failed,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    producer_id = field(request, "producer_id", -1)
    epoch = field(request, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        # KIP-360: an existing producer asks for a bumped epoch to reset its sequences.
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "producer_id": producer_id,
            "producer_epoch": epoch + 1,
        }
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "producer_id": await broker.allocate_producer_id(),
        "producer_epoch": 0,
    }
