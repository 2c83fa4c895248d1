"""The registry as a ``tabletopic serve`` component: migrates its tables, serves the REST API on
``schema.registry.listener`` and offers the parts above it the cached in-process lookup
(:attr:`RegistryComponent.lookup`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.component import Started
from tabletopic.config import Config
from tabletopic.http_auth import SCHEMA_REGISTRY, HttpSecurity, protect
from tabletopic.schema_registry import settings
from tabletopic.schema_registry.client import CachedSchemaLookup
from tabletopic.schema_registry.opening import build_registry
from tabletopic.schema_registry.registry import SchemaRegistry

if TYPE_CHECKING:
    from tabletopic.http_service import HttpService

log = logging.getLogger(__name__)


@dataclass(eq=False)
class RegistryComponent:
    """The registry over the node's metadata database; its REST API is guarded by the node's
    :class:`~tabletopic.http_auth.HttpSecurity`.

    Args:
        cluster_id: the Kafka cluster this registry serves (``/v1/metadata/id``), asked at start.
    """

    name = "schema-registry"

    config: Config
    engine: Engine
    metrics: CollectorRegistry
    cluster_id: Callable[[], str] = lambda: ""
    _: KW_ONLY
    http_security: HttpSecurity
    _http: HttpService | None = field(default=None, init=False)
    _registry: SchemaRegistry | None = field(default=None, init=False)
    _lookup: CachedSchemaLookup | None = field(default=None, init=False)

    registry = Started[SchemaRegistry]("registry")
    lookup = Started[CachedSchemaLookup]("schema lookup")  # the cached in-process lookup

    async def start(self) -> None:
        from tabletopic.http_service import HttpService
        from tabletopic.schema_registry.routers import create_app

        config = self.config
        registry = build_registry(self.engine, config, self.metrics)
        self._registry = registry
        self._lookup = CachedSchemaLookup(
            registry,
            latest_ttl_s=config.get(settings.LATEST_TTL_MS) / 1000,
            max_entries=config.get(settings.CACHE_MAX_ENTRIES),
            metrics=self.metrics,
        )
        listener = config.get(settings.LISTENER)
        if listener:
            app = create_app(config, registry, metrics=self.metrics)
            app.state.cluster_id = self.cluster_id() or "tabletopic"
            served = protect(app, self.http_security, SCHEMA_REGISTRY)
            self._http = HttpService(
                "schema registry",
                served,
                listener,
                key=settings.LISTENER.name,
                tls=self.http_security.https_options(listener),
            )
            await self._http.start()

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None
        if self._registry is not None:
            self._registry.close()
            self._registry = None
