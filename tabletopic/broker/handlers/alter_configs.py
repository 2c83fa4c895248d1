"""AlterConfigs (33): replace a topic's explicit configs, or set broker configs dynamically.
Unknown keys are refused with INVALID_CONFIG."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC
from tabletopic.broker.topics import TopicError
from tabletopic.config import Config, ConfigError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)


def result(resource: Any, code: ErrorCode = ErrorCode.none, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


def check_broker_configs(broker: BrokerService, resource: Any, values: dict[str, str | None]) -> None:
    """Raises TopicError(INVALID_CONFIG) for unknown or malformed broker keys."""
    if resource.resource_name not in ("", str(broker.node_id)):
        raise TopicError(ErrorCode.invalid_request, f"no broker {resource.resource_name}")
    for name, value in values.items():
        key = Config.lookup(name)
        if key is None:
            raise TopicError(ErrorCode.invalid_config, f"unknown broker config {name}")
        if value is not None:
            try:
                key.parse(value)
            except ConfigError as exc:
                raise TopicError(ErrorCode.invalid_config, str(exc)) from exc


async def alter_resource(broker: BrokerService, resource: Any, validate_only: bool) -> dict[str, Any]:
    values = {c.name: c.value for c in resource.configs}
    try:
        if resource.resource_type == RESOURCE_TOPIC:
            if broker.topics.get(resource.resource_name) is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name} does not exist"
                )
            if any(v is None for v in values.values()):
                raise TopicError(ErrorCode.invalid_config, "null config values are not allowed")
            await broker.topics.replace_configs(resource.resource_name, values, validate_only=validate_only)
        elif resource.resource_type == RESOURCE_BROKER:
            check_broker_configs(broker, resource, values)
            if not validate_only:
                await broker.set_dynamic_configs(values, replace=True)
        else:
            raise TopicError(
                ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported"
            )
    except TopicError as exc:
        log.info("AlterConfigs %s refused: %s", resource.resource_name, exc)
        return result(resource, exc.error_code, str(exc))
    return result(resource)


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "responses": [await alter_resource(broker, r, request.validate_only) for r in request.resources],
    }
