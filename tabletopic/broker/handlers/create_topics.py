"""CreateTopics (19): validate_only, configs, explicit assignments; any replication factor is
accepted (durability comes from the WAL and object storage, not replicas)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import ZERO_UUID
from tabletopic.broker.handlers.describe_configs import topic_config_entries
from tabletopic.broker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from tabletopic.broker.protocol.responses import CreatableTopicResult, CreateTopicsResponse
from tabletopic.broker.topics import TopicError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)


async def _create(broker: BrokerService, wanted: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    result: CreatableTopicResult = {
        "name": wanted.name,
        "topic_id": ZERO_UUID,
        "error_code": ErrorCode.none,
        "error_message": None,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": None,
    }
    if wanted.assignments:
        count = len(wanted.assignments)
        if wanted.num_partitions not in (-1, count):
            return {
                **result,
                "error_code": ErrorCode.invalid_request,
                "error_message": "give either num_partitions or assignments",
            }
    else:
        count = (
            wanted.num_partitions if wanted.num_partitions != -1 else broker.broker_config("num.partitions")
        )
    if wanted.replication_factor == 0 or wanted.replication_factor < -1:
        return {
            **result,
            "error_code": ErrorCode.invalid_replication_factor,
            "error_message": f"replication factor {wanted.replication_factor} is invalid",
        }
    configs = {c.name: c.value for c in wanted.configs}
    try:
        topic = await broker.topics.create(wanted.name, count, configs, validate_only=validate_only)
    except TopicError as exc:
        log.info("CreateTopics %r refused: %s", wanted.name, exc)
        return {**result, "error_code": exc.error_code, "error_message": str(exc)}
    return {
        **result,
        "topic_id": topic.topic_id if not validate_only else ZERO_UUID,
        "num_partitions": topic.partition_count,
        "replication_factor": 1 if wanted.replication_factor == -1 else wanted.replication_factor,
        "configs": [
            {
                "name": c["name"],
                "value": c["value"],
                "read_only": False,
                "config_source": c["config_source"],
                "is_sensitive": False,
            }
            for c in topic_config_entries(broker, topic)
        ],
    }


async def handle(
    broker: BrokerService, ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    counts = Counter(t.name for t in request.topics)
    results: list[CreatableTopicResult] = []
    for wanted in request.topics:
        if counts[wanted.name] > 1:
            results.append(
                {
                    "name": wanted.name,
                    "error_code": ErrorCode.invalid_request,
                    "error_message": "topic named more than once in the request",
                }
            )
            continue
        results.append(await _create(broker, wanted, request.validate_only))
    return {"throttle_time": 0, "topics": results}
