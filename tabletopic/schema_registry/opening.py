"""Opening a registry: its tables migrated on an engine, the node's settings and metrics applied.

The node's component opens one over the shared metadata engine; a standalone server (``python -m
tabletopic.schema_registry``, tests, benches) opens one over an engine of its own for the lifetime of
its app. Kept apart from the component and from the HTTP package so that both depend on this module
and neither on the other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic import settings as platform_settings
from tabletopic.config import Config, make_private_dir
from tabletopic.schema_registry import settings
from tabletopic.schema_registry.compatibility import CompatibilityLevel
from tabletopic.schema_registry.db import MIGRATIONS, sqlite_read_engine, sqlite_write_engine
from tabletopic.schema_registry.registry import SchemaRegistry
from tabletopic.schema_registry.routers.factory import Lifespan, create_app


def build_registry(
    engine: Engine, config: Config, metrics: CollectorRegistry | None = None
) -> SchemaRegistry:
    """Migrate the registry tables on ``engine`` and return a registry over them."""
    database.migrate(engine, "schema_registry", MIGRATIONS)
    on_register = None
    if metrics is not None:
        registrations = Counter(
            "tabletopic_schema_registry_registrations",
            "Schema registrations answered (new and repeated)",
            registry=metrics,
        )
        on_register = registrations.inc
    return SchemaRegistry(
        engine,
        default_level=CompatibilityLevel(config.get(settings.DEFAULT_COMPATIBILITY)),
        parsed_cache_size=config.get(settings.PARSED_CACHE_MAX_ENTRIES),
        on_register=on_register,
        read_engine=sqlite_read_engine(engine),
        write_engine=sqlite_write_engine(engine, config.get(settings.SQLITE_SYNCHRONOUS)),
    )


def open_registry(config: Config) -> tuple[Engine, SchemaRegistry]:
    """A registry with its own engine over ``metadata.url`` (standalone server, benches)."""
    make_private_dir(config.data_dir)
    url = config.get(platform_settings.METADATA_URL) or database.default_url(config.data_dir)
    engine = database.create_engine(url)
    return engine, build_registry(engine, config)


def standalone_lifespan(config: Config) -> Lifespan:
    """An app lifespan that opens a registry with :func:`open_registry` before the app serves and
    closes it, and its engine, when the app stops."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine, registry = open_registry(config)
        app.state.registry = registry
        try:
            yield
        finally:
            registry.close()
            engine.dispose()

    return lifespan


def standalone_app(config: Config) -> FastAPI:
    """The registry app over a registry of its own (opened in the app's lifespan)."""
    return create_app(config, lifespan=standalone_lifespan(config))
