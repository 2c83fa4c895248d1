"""DeleteTopics (20): by name, or by topic id (v6+)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import ZERO_UUID
from tabletopic.broker.protocol.messages.delete_topics import DeleteTopicsRequest
from tabletopic.broker.protocol.responses import DeletableTopicResult, DeleteTopicsResponse
from tabletopic.broker.topics import TopicError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(
    broker: BrokerService, ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    # One of the two lists is empty: v1-v5 name topics in topic_names, v6 in topics.
    wanted: list[tuple[str | None, uuid.UUID | None]] = [(t.name, t.topic_id) for t in request.topics]
    wanted += [(name, None) for name in request.topic_names]
    results: list[DeletableTopicResult] = []
    for name, topic_id in wanted:
        if name is None and topic_id not in (None, ZERO_UUID):
            topic = broker.topics.by_id(topic_id)
            if topic is None:
                results.append(
                    {
                        "name": None,
                        "topic_id": topic_id,
                        "error_code": ErrorCode.unknown_topic_id,
                        "error_message": f"no topic has id {topic_id}",
                    }
                )
                continue
            name = topic.name
        existing = broker.topics.get(name or "")
        try:
            await broker.delete_topic(name or "")
        except TopicError as exc:
            results.append(
                {
                    "name": name,
                    "topic_id": topic_id or ZERO_UUID,
                    "error_code": exc.error_code,
                    "error_message": str(exc),
                }
            )
            continue
        results.append(
            {
                "name": name,
                "topic_id": existing.topic_id if existing else ZERO_UUID,
                "error_code": ErrorCode.none,
                "error_message": None,
            }
        )
    return {"throttle_time": 0, "responses": results}
