"""The app factory: routers mounted by :func:`~.setup.setup_routers`, error handlers registered
once, and the ASGI layers of :mod:`.middleware` in front.

The factory does not open a registry. A caller that owns one (the node's component) passes it in;
a standalone server passes a lifespan that opens one and puts it in ``app.state.registry`` (see
:mod:`tabletopic.schema_registry.opening`), so this package never depends on how a registry is opened.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from tabletopic.config import Config
from tabletopic.schema_registry import settings as sr_settings
from tabletopic.schema_registry.registry import SchemaRegistry
from tabletopic.schema_registry.routers.contextpaths import ContextPaths
from tabletopic.schema_registry.routers.errors import install_error_handlers
from tabletopic.schema_registry.routers.fastpath import FastLookups
from tabletopic.schema_registry.routers.fastwrites import FastWrites
from tabletopic.schema_registry.routers.middleware import BodyLimit, RawPathRouting, RequestMetrics
from tabletopic.schema_registry.routers.models import RegistryJSONResponse
from tabletopic.schema_registry.routers.setup import setup_routers

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_app(
    config: Config,
    registry: SchemaRegistry | None = None,
    lifespan: Lifespan | None = None,
    metrics: CollectorRegistry | None = None,
) -> FastAPI:
    """Build the registry app.

    Args:
        config: node configuration (``schema.registry.*`` keys).
        registry: the registry to serve, owned (started and stopped) by the caller; or ``None`` when
            ``lifespan`` provides one.
        lifespan: the app's lifespan; it must set ``app.state.registry`` when ``registry`` is ``None``.
        metrics: where to count requests (the node's registry); ``None`` counts nothing.
    """
    app = FastAPI(
        title="tabletopic schema registry",
        default_response_class=RegistryJSONResponse,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.registry = registry
    install_error_handlers(app)
    setup_routers(app)
    max_bytes = config.get(sr_settings.MAX_REQUEST_BYTES)
    app.add_middleware(BodyLimit, max_bytes=max_bytes)
    app.add_middleware(RawPathRouting)
    app.add_middleware(FastLookups, registry=lambda: app.state.registry)
    app.add_middleware(FastWrites, registry=lambda: app.state.registry, max_bytes=max_bytes)
    app.add_middleware(ContextPaths)
    if metrics is not None:
        app.add_middleware(RequestMetrics, metrics=metrics)
    return app
