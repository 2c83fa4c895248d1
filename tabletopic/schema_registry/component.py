"""The registry as a ``tabletopic serve`` component: migrates its tables, serves the REST API on
``schema.registry.listener`` and offers the parts above it the cached in-process lookup
(:attr:`RegistryComponent.lookup`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.component import started
from tabletopic.config import Config
from tabletopic.http_auth import SCHEMA_REGISTRY, HttpSecurity, protect
from tabletopic.schema_registry import settings
from tabletopic.schema_registry.client import CachedSchemaLookup
from tabletopic.schema_registry.opening import build_registry
from tabletopic.schema_registry.registry import SchemaRegistry

if TYPE_CHECKING:
    from tabletopic.http_service import HttpService

log = logging.getLogger(__name__)


class RegistryComponent:
    """The registry over the node's metadata database.

    Args:
        cluster_id: the Kafka cluster this registry serves (``/v1/metadata/id``), asked at start.
        http_security: who may call the REST API and its TLS keys (the broker's users and keys,
            handed down by the assembly).
    """

    name = "schema-registry"

    def __init__(
        self,
        config: Config,
        engine: Engine,
        metrics: CollectorRegistry,
        cluster_id: Callable[[], str] = lambda: "",
        *,
        http_security: HttpSecurity,
    ) -> None:
        self._config = config
        self._engine = engine
        self._metrics = metrics
        self._cluster_id = cluster_id
        self._http_security = http_security
        self._http: HttpService | None = None
        self._registry: SchemaRegistry | None = None
        self._lookup: CachedSchemaLookup | None = None

    @property
    def registry(self) -> SchemaRegistry:
        """The started registry."""
        return started(self._registry, self.name, "registry")

    @property
    def lookup(self) -> CachedSchemaLookup:
        """The cached in-process schema lookup."""
        return started(self._lookup, self.name, "schema lookup")

    async def start(self) -> None:
        from tabletopic.http_service import HttpService
        from tabletopic.schema_registry.routers import create_app

        config = self._config
        registry = build_registry(self._engine, config, self._metrics)
        self._registry = registry
        self._lookup = CachedSchemaLookup(
            registry,
            latest_ttl_s=config.get(settings.LATEST_TTL_MS) / 1000,
            max_entries=config.get(settings.CACHE_MAX_ENTRIES),
            metrics=self._metrics,
        )
        listener = config.get(settings.LISTENER)
        if listener:
            app = create_app(config, registry, metrics=self._metrics)
            app.state.cluster_id = self._cluster_id() or "tabletopic"
            served = protect(app, self._http_security, SCHEMA_REGISTRY)
            self._http = HttpService(
                "schema registry",
                served,
                listener,
                key=settings.LISTENER.name,
                tls=self._http_security.https_options(listener),
            )
            await self._http.start()

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None
        if self._registry is not None:
            self._registry.close()
            self._registry = None
