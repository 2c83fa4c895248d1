"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT on single keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.alter_configs import alter_resources
from tabletopic.broker.protocol.messages.alter_configs import (
    AlterableConfigOperation,
    ConfigsAlteration,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from tabletopic.broker.protocol.responses import IncrementalAlterConfigsResponse
from tabletopic.broker.topics import Topic, TopicError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_operations(
    current: dict[str, str], operations: Sequence[AlterableConfigOperation], effective: dict[str, str]
) -> dict[str, str]:
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


async def handle(
    broker: BrokerService, ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    def topic_update(topic: Topic, resource: IncrementalAlterConfigsResource) -> dict[str, str]:
        return apply_operations(topic.configs, resource.configs, broker.effective_topic_configs(topic))

    def broker_update(
        resource: IncrementalAlterConfigsResource,
    ) -> tuple[dict[str, str | None], dict[str, str]]:
        updated = apply_operations(dict(broker.dynamic_configs), resource.configs, {})
        return {c.name: None for c in resource.configs} | updated, updated

    def group_update(current: dict[str, str], resource: IncrementalAlterConfigsResource) -> dict[str, str]:
        return apply_operations(current, resource.configs, {})

    alteration: ConfigsAlteration[IncrementalAlterConfigsResource] = request
    return await alter_resources(
        broker, alteration, "IncrementalAlterConfigs", topic_update, broker_update, group_update
    )
