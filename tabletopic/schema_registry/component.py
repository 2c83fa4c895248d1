"""The registry as a ``tabletopic serve`` component: migrates its tables, serves the REST API on
``schema.registry.listener`` and offers the cached in-process lookup as
``platform.services["schema_registry"]``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tabletopic.schema_registry import settings
from tabletopic.schema_registry.client import CachedSchemaLookup
from tabletopic.schema_registry.opening import build_registry
from tabletopic.schema_registry.registry import SchemaRegistry

if TYPE_CHECKING:
    from tabletopic.http_service import HttpService
    from tabletopic.platform import Platform

log = logging.getLogger(__name__)


class RegistryComponent:
    name = "schema-registry"

    def __init__(self) -> None:
        self._http: HttpService | None = None
        self.registry: SchemaRegistry | None = None

    async def start(self, platform: Platform) -> None:
        from tabletopic.http_service import HttpService
        from tabletopic.schema_registry.routers import create_app

        self.registry = build_registry(platform.engine, platform.config, platform.metrics)
        platform.services["schema_registry"] = CachedSchemaLookup(
            self.registry,
            latest_ttl_s=platform.config.get(settings.LATEST_TTL_MS) / 1000,
            max_entries=platform.config.get(settings.CACHE_MAX_ENTRIES),
            metrics=platform.metrics,
        )
        listener = platform.config.get(settings.LISTENER)
        if listener:
            app = create_app(platform.config, self.registry, metrics=platform.metrics)
            # /v1/metadata/id reports the Kafka cluster this registry serves (the broker starts first).
            broker = platform.services.get("broker")
            app.state.cluster_id = getattr(broker, "cluster_id", "") or "tabletopic"
            self._http = HttpService("schema registry", app, listener)
            await self._http.start()

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None
        if self.registry is not None:
            self.registry.close()
            self.registry = None
