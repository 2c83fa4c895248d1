"""DescribeConfigs (32): topic configs (explicit ones as DYNAMIC_TOPIC_CONFIG, the rest with their
defaults) and broker configs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.group_configs import RESOURCE_GROUP, describe_entries, state_prefix
from tabletopic.broker.protocol.messages.describe_configs import (
    ConfigResource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from tabletopic.broker.protocol.responses import (
    AlterConfigsResourceResponse,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from tabletopic.broker.topic_config_keys import (
    TOPIC_CONFIG_KEYS,
    TYPE_BOOLEAN,
    TYPE_DOUBLE,
    TYPE_INT,
    TYPE_LIST,
    TYPE_PASSWORD,
    TYPE_STRING,
    topic_config_documentation,
    topic_config_type,
)
from tabletopic.broker.topics import Topic
from tabletopic.config import REGISTRY

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SENSITIVE_HINTS = ("password", "secret", "users", "key", "jaas")
# The metadata database's URL names the database and, on PostgreSQL, usually its password.
SENSITIVE_KEYS = frozenset({"metadata.url"})
# A URL carrying credentials (``scheme://user:password@host``, ``scheme://token@host``).
_URL_WITH_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s@]+@")
# Broker keys that need a restart to change; Kafka 4 reports listeners as static and read-only.
READ_ONLY_BROKER_KEYS = {
    "listeners",
    "advertised.listeners",
    "broker.id",
    "cluster.id",
    "data.dir",
    "metadata.url",
}
_PYTHON_TYPES = {bool: TYPE_BOOLEAN, int: TYPE_INT, float: TYPE_DOUBLE, list: TYPE_LIST, str: TYPE_STRING}


def topic_config_entries(broker: BrokerService, topic: Topic) -> list[DescribeConfigsResourceResult]:
    entries: list[DescribeConfigsResourceResult] = []
    for name in sorted(set(TOPIC_CONFIG_KEYS) | set(topic.configs)):
        if name in topic.configs:
            source = SOURCE_DYNAMIC_TOPIC
        else:
            definition = TOPIC_CONFIG_KEYS[name]
            broker_key = definition.broker_default
            if broker_key is not None and broker_key in broker.dynamic_configs:
                source = SOURCE_DYNAMIC_BROKER
            elif broker_key is not None and broker.is_static_broker_config(broker_key):
                source = SOURCE_STATIC_BROKER
            else:
                source = SOURCE_DEFAULT
        entries.append(
            {
                "name": name,
                "value": broker.topic_config(topic, name),
                "config_source": source,
                "config_type": topic_config_type(name),
                "documentation": topic_config_documentation(name),
            }
        )
    return entries


def broker_config_entries(broker: BrokerService) -> list[DescribeConfigsResourceResult]:
    entries: list[DescribeConfigsResourceResult] = []
    for name, value in sorted(broker.config.as_dict().items()):
        key = REGISTRY.get(name)
        if key is None:
            continue
        if name == "advertised.listeners" and not value:
            # Effective value: what Metadata hands out (the bound listeners by default).
            value = [f"{e.name}://{e.host}:{e.port}" for e in broker.advertised.values()]
        if name in broker.dynamic_configs:
            value, source = broker.dynamic_configs[name], SOURCE_DYNAMIC_BROKER
        elif broker.is_static_broker_config(name) or name in READ_ONLY_BROKER_KEYS:
            source = SOURCE_STATIC_BROKER
        else:
            source = SOURCE_DEFAULT
        sensitive = is_sensitive(name, value)
        entries.append(
            {
                "name": name,
                "value": None if sensitive else _text(value),
                "config_source": source,
                "is_sensitive": sensitive,
                "read_only": name in READ_ONLY_BROKER_KEYS,
                "documentation": key.doc,
                "config_type": TYPE_PASSWORD if sensitive else _PYTHON_TYPES.get(key.type, TYPE_STRING),
            }
        )
    return entries


def is_sensitive(name: str, value: Any) -> bool:
    """Whether a broker config's value is withheld (answered as null with ``is_sensitive``): keys
    named for secrets, the metadata database URL, and any value holding a URL with credentials."""
    if name in SENSITIVE_KEYS or any(hint in name for hint in SENSITIVE_HINTS):
        return True
    values = value if isinstance(value, list) else [value]
    return any(isinstance(v, str) and _URL_WITH_CREDENTIALS.search(v) for v in values)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def resource_result(
    resource: ConfigResource, code: ErrorCode = ErrorCode.none, message: str | None = None
) -> AlterConfigsResourceResponse:
    """One resource's outcome, as DescribeConfigs, AlterConfigs and IncrementalAlterConfigs answer
    it (DescribeConfigs adds the configs)."""
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


def _result(
    resource: ConfigResource,
    code: ErrorCode,
    message: str | None,
    configs: list[DescribeConfigsResourceResult],
) -> DescribeConfigsResult:
    return {**resource_result(resource, code, message), "configs": configs}


def describe(
    broker: BrokerService, resource: DescribeConfigsResource, include_documentation: bool
) -> DescribeConfigsResult:
    if resource.resource_type == RESOURCE_TOPIC:
        topic = broker.topics.get(resource.resource_name)
        if topic is None:
            return _result(
                resource,
                ErrorCode.unknown_topic_or_partition,
                f"topic {resource.resource_name} does not exist",
                [],
            )
        entries = topic_config_entries(broker, topic)
    elif resource.resource_type == RESOURCE_BROKER:
        if resource.resource_name not in ("", str(broker.node_id)):
            return _result(resource, ErrorCode.invalid_request, f"no broker {resource.resource_name}", [])
        entries = broker_config_entries(broker)
    else:
        return _result(
            resource,
            ErrorCode.invalid_request,
            f"resource type {resource.resource_type} is not supported",
            [],
        )
    return _configs_result(resource, entries, include_documentation)


def _configs_result(
    resource: DescribeConfigsResource,
    entries: Sequence[DescribeConfigsResourceResult],
    include_documentation: bool,
) -> DescribeConfigsResult:
    keys = resource.configuration_keys
    if keys is not None:
        entries = [e for e in entries if e["name"] in keys]
    configs: list[DescribeConfigsResourceResult] = [
        {
            "name": e["name"],
            "value": e["value"],
            "read_only": e.get("read_only", False),
            "config_source": e["config_source"],
            "is_sensitive": e.get("is_sensitive", False),
            "synonyms": [],
            "config_type": e["config_type"],
            "documentation": e.get("documentation") if include_documentation else None,
        }
        for e in entries
    ]
    return _result(resource, ErrorCode.none, None, configs)


async def _describe_group(
    broker: BrokerService, resource: DescribeConfigsResource, include_documentation: bool
) -> DescribeConfigsResult:
    explicit = await broker.topics.state_items(state_prefix(resource.resource_name))
    return _configs_result(resource, describe_entries(explicit), include_documentation)


async def handle(
    broker: BrokerService, ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    include_documentation = request.include_documentation
    results: list[DescribeConfigsResult] = []
    for resource in request.resources:
        if resource.resource_type == RESOURCE_GROUP:
            results.append(await _describe_group(broker, resource, include_documentation))
        else:
            results.append(describe(broker, resource, include_documentation))
    return {"throttle_time": 0, "results": results}
