"""AlterConfigs (33): replace a topic's or a group's explicit configs, or set broker configs
dynamically. Unknown keys are refused with INVALID_CONFIG."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.group_configs import (
    RESOURCE_GROUP,
    InvalidGroupConfig,
    state_prefix,
    validate_group_configs,
)
from tabletopic.broker.handlers.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC, resource_result
from tabletopic.broker.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    ConfigsAlteration,
)
from tabletopic.broker.protocol.messages.describe_configs import ConfigResource
from tabletopic.broker.protocol.responses import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from tabletopic.broker.topics import Topic, TopicError
from tabletopic.config import Config, ConfigError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)


def check_broker_configs(
    broker: BrokerService, resource: ConfigResource, values: dict[str, str | None]
) -> None:
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


ResourceT = TypeVar("ResourceT", bound=ConfigResource)
# (topic, resource) -> new explicit configs
TopicUpdate: TypeAlias = Callable[[Topic, ResourceT], dict[str, str]]
# resource -> (to check, new dynamic configs: None removes a key)
BrokerUpdate: TypeAlias = Callable[[ResourceT], tuple[dict[str, str | None], Mapping[str, str | None]]]
# (current explicit, resource) -> new
GroupUpdate: TypeAlias = Callable[[dict[str, str], ResourceT], dict[str, str]]


async def alter_resources(
    broker: BrokerService,
    request: ConfigsAlteration[ResourceT],
    api: str,
    topic_update: TopicUpdate[ResourceT],
    broker_update: BrokerUpdate[ResourceT],
    group_update: GroupUpdate[ResourceT],
) -> AlterConfigsResponse:
    """The flow AlterConfigs and IncrementalAlterConfigs share: per resource, compute the new config
    set with the API's own rule, validate it, store it unless ``validate_only``, answer per resource."""
    responses: list[AlterConfigsResourceResponse] = []
    for resource in request.resources:
        try:
            if resource.resource_type == RESOURCE_TOPIC:
                topic = broker.topics.get(resource.resource_name)
                if topic is None:
                    raise TopicError(
                        ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name} does not exist"
                    )
                configs = topic_update(topic, resource)
                await broker.topics.replace_configs(topic.name, configs, validate_only=request.validate_only)
            elif resource.resource_type == RESOURCE_BROKER:
                to_check, dynamic = broker_update(resource)
                check_broker_configs(broker, resource, to_check)
                if not request.validate_only:
                    await broker.set_dynamic_configs(dynamic, replace=True)
            elif resource.resource_type == RESOURCE_GROUP:
                await _alter_group(broker, resource, group_update, request.validate_only)
            else:
                raise TopicError(
                    ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported"
                )
            responses.append(resource_result(resource))
        except TopicError as exc:
            log.info("%s %r refused: %s", api, resource.resource_name, exc)
            responses.append(resource_result(resource, exc.error_code, str(exc)))
    return {"throttle_time": 0, "responses": responses}


async def _alter_group(
    broker: BrokerService, resource: ResourceT, update: GroupUpdate[ResourceT], validate_only: bool
) -> None:
    """Validate and store a group's explicit configs (see :mod:`tabletopic.broker.group_configs`)."""
    prefix = state_prefix(resource.resource_name)
    current = await broker.topics.state_items(prefix)
    try:
        values = validate_group_configs(update(current, resource))
    except InvalidGroupConfig as exc:
        raise TopicError(ErrorCode.invalid_config, str(exc)) from exc
    if not validate_only:
        await broker.topics.replace_state_items(prefix, values)


def _replace_topic_configs(_topic: Topic | None, resource: AlterConfigsResource) -> dict[str, str]:
    values = {c.name: c.value for c in resource.configs}
    if any(v is None for v in values.values()):
        raise TopicError(ErrorCode.invalid_config, "null config values are not allowed")
    return {name: value for name, value in values.items() if value is not None}


def _replace_broker_configs(
    resource: AlterConfigsResource,
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    values = {c.name: c.value for c in resource.configs}
    return values, values


async def handle(
    broker: BrokerService, ctx: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    alteration: ConfigsAlteration[AlterConfigsResource] = request
    return await alter_resources(
        broker,
        alteration,
        "AlterConfigs",
        _replace_topic_configs,
        _replace_broker_configs,
        lambda _current, resource: _replace_topic_configs(None, resource),
    )
