"""``tabletopic serve``'s broker: the Kafka listeners on top of the node's stream store, registered
as ``platform.services["broker"]`` (a :class:`~tabletopic.broker.service.BrokerService`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.handlers import GROUP_HANDLERS
from tabletopic.broker.groups.settings import group_config
from tabletopic.broker.handlers import HANDLERS
from tabletopic.broker.metrics import BrokerMetrics
from tabletopic.broker.protocol.versions import GROUP_MAX_VERSIONS, MAX_VERSIONS, advertised_ranges
from tabletopic.broker.server import Dispatcher, KafkaServer
from tabletopic.broker.service import BrokerService

if TYPE_CHECKING:
    from tabletopic.platform import Platform

log = logging.getLogger(__name__)


class BrokerComponent:
    name = "broker"

    def __init__(self) -> None:
        self.service: BrokerService | None = None
        self.server: KafkaServer | None = None
        self._groups: Any = None

    async def start(self, platform: Platform) -> None:
        store = platform.services.get("streams")
        if store is None:
            raise RuntimeError("the broker needs the storage component started first (services['streams'])")

        def table_validator(configs: dict[str, str]) -> None:
            # Looked up per call: the table pipeline starts after the broker.
            validator = platform.services.get("table_config_validator")
            if validator is not None:
                validator(configs)

        service = BrokerService(platform.config, platform.engine, store, table_validator=table_validator)
        service.metrics = BrokerMetrics(platform.metrics, service.topics.partition_count)
        await service.start()
        dispatcher = Dispatcher(service)
        dispatcher.add(HANDLERS, service, MAX_VERSIONS)
        dispatcher.add({17: _unused, 36: _unused}, None, MAX_VERSIONS)  # answered by the connection
        server = KafkaServer(service, dispatcher)
        self.service, self.server = service, server
        await server.bind()
        await self._start_groups(platform, service, dispatcher)
        service.api_ranges = advertised_ranges(dispatcher.max_versions)
        await server.serve()
        platform.services["broker"] = service

    async def _start_groups(self, platform: Platform, service: BrokerService, dispatcher: Dispatcher) -> None:
        """Serve the consumer-group APIs; a deleted topic's committed offsets go with it."""
        endpoint = service.advertised_for(None)

        def topic_partitions(name: str) -> int | None:
            topic = service.topics.get(name)
            return topic.partition_count if topic is not None else None

        self._groups = GroupCoordinator(
            platform.engine,
            service.node_id,
            endpoint.host,
            endpoint.port,
            topic_partitions,
            config=group_config(platform.config),
        )
        await self._groups.start()
        service.topic_deleted_hooks.append(self._groups.delete_topic_offsets)
        handlers = dict(GROUP_HANDLERS)
        if 10 in handlers:
            handlers[10] = _coordinator_on_callers_listener(service, handlers[10])
        dispatcher.add(handlers, self._groups, GROUP_MAX_VERSIONS)
        platform.services["group_coordinator"] = self._groups

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        if self._groups is not None:
            await self._groups.stop()
        if self.service is not None:
            await self.service.stop()


def _coordinator_on_callers_listener(service: BrokerService, find_coordinator: Any) -> Any:
    """FindCoordinator answers with the endpoint of the listener the client came in on (a SASL
    client must not be sent to the PLAINTEXT port); the coordinator itself only knows one address."""

    async def handle(coordinator: Any, ctx: Any, request: Any) -> Any:
        fields = await find_coordinator(coordinator, ctx, request)
        endpoint = service.advertised_for(ctx)
        if isinstance(fields, dict):
            entries = [fields, *fields.get("coordinators", [])]
            for entry in entries:
                if entry.get("node_id") == service.node_id:
                    entry["host"], entry["port"] = endpoint.host, endpoint.port
        return fields

    return handle


async def _unused(target: Any, ctx: Any, request: Any) -> None:  # pragma: no cover - never routed
    return None
