"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT on single keys."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.alter_configs import check_broker_configs, result
from tabletopic.broker.handlers.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC
from tabletopic.broker.topics import TopicError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_operations(current: dict[str, str], operations: Any, effective: dict[str, str]) -> dict[str, str]:
    """The explicit config set after applying the operations. Raises TopicError."""
    updated = dict(current)
    for op in operations:
        if op.config_operation == SET:
            if op.value is None:
                raise TopicError(ErrorCode.invalid_config, f"SET of {op.name} needs a value")
            updated[op.name] = op.value
        elif op.config_operation == DELETE:
            updated.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            base = updated.get(op.name, effective.get(op.name, ""))
            items = [i for i in base.split(",") if i]
            new = [i for i in (op.value or "").split(",") if i]
            if op.config_operation == APPEND:
                items += [i for i in new if i not in items]
            else:
                items = [i for i in items if i not in new]
            updated[op.name] = ",".join(items)
        else:
            raise TopicError(ErrorCode.invalid_request, f"unknown config operation {op.config_operation}")
    return updated


async def alter_resource(broker: BrokerService, resource: Any, validate_only: bool) -> dict[str, Any]:
    try:
        if resource.resource_type == RESOURCE_TOPIC:
            topic = broker.topics.get(resource.resource_name)
            if topic is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name} does not exist"
                )
            updated = apply_operations(topic.configs, resource.configs, broker.effective_topic_configs(topic))
            await broker.topics.replace_configs(topic.name, updated, validate_only=validate_only)
        elif resource.resource_type == RESOURCE_BROKER:
            updated = apply_operations(dict(broker.dynamic_configs), resource.configs, {})
            check_broker_configs(broker, resource, {c.name: None for c in resource.configs} | updated)
            if not validate_only:
                await broker.set_dynamic_configs(updated, replace=True)
        else:
            raise TopicError(
                ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported"
            )
    except TopicError as exc:
        log.info("IncrementalAlterConfigs %s refused: %s", resource.resource_name, exc)
        return result(resource, exc.error_code, str(exc))
    return result(resource)


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "responses": [await alter_resource(broker, r, request.validate_only) for r in request.resources],
    }
