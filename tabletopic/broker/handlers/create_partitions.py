"""CreatePartitions (37): grow a topic (never shrink)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.topics import TopicError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    results = []
    for wanted in request.topics:
        try:
            await broker.topics.add_partitions(wanted.name, wanted.count, validate_only=request.validate_only)
            results.append({"name": wanted.name, "error_code": ErrorCode.none, "error_message": None})
        except TopicError as exc:
            results.append({"name": wanted.name, "error_code": exc.error_code, "error_message": str(exc)})
    return {"throttle_time": 0, "results": results}
