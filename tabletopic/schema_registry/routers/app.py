"""The app factory: routers mounted in one place, error handlers registered once, the registry
started in the lifespan, and two ASGI layers in front (raw-path routing and a body cap)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram

from tabletopic.config import Config
from tabletopic.schema_registry import settings as sr_settings
from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.registry import SchemaRegistry
from tabletopic.schema_registry.routers import compatibility, config, misc, mode, schemas, subjects
from tabletopic.schema_registry.routers.deps import escape_segment
from tabletopic.schema_registry.routers.errors import install_error_handlers
from tabletopic.schema_registry.routers.models import RegistryJSONResponse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Lifespan = Callable[[FastAPI], Any]

_JSON_TYPE = re.compile(rb"^application/(?:[\w.+-]+\+)?json\b", re.IGNORECASE)


def setup_routers(app: FastAPI) -> None:
    for module in (schemas, subjects, compatibility, config, mode, misc):
        app.include_router(module.router)


class RawPathRouting:
    """Route on the path as sent. Starlette decodes ``%2F`` before matching, so ``/subjects/a%2Fb``
    would look like two segments; here each raw segment is decoded with ``/`` and ``%`` kept
    escaped, and :func:`~.deps.unescape_segment` restores them inside the endpoint."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw:
            text = raw.decode("utf-8", "replace").split("?", 1)[0]
            if "%" in text:
                scope = dict(scope)
                scope["path"] = "/".join(escape_segment(part) for part in text.split("/"))
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuse bodies above ``max_bytes`` (413, error 41301) before reading them when a length is
    declared, and stop reading mid-stream when a chunked body grows past it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = 0
        headers = []
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                declared = int(value) if value.isdigit() else self.max_bytes + 1
            if name == b"content-type" and not _JSON_TYPE.search(value):
                # curl's default form type, octet-stream…: Confluent's API only speaks JSON.
                value = b"application/json"
            headers.append((name, value))
        scope = dict(scope, headers=headers)
        if declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        # Read the body here (bounded) and replay it: FastAPI turns any exception raised while it
        # reads a body into a generic 400, so the limit must be enforced before the app runs.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = RegistryError(ErrorCode.REQUEST_TOO_LARGE, f"Request body larger than {self.max_bytes} bytes")
        response = RegistryJSONResponse(
            error.body(), status_code=error.error.status, headers={"connection": "close"}
        )
        await response(scope, receive, send)


class RequestMetrics:
    """Counts answers by method and status and times them, on the node's metrics registry."""

    def __init__(self, app: ASGIApp, metrics: CollectorRegistry) -> None:
        self.app = app
        self.requests = Counter(
            "tabletopic_schema_registry_requests",
            "Schema registry HTTP answers by method and status",
            ["method", "status"],
            registry=metrics,
        )
        self.latency = Histogram(
            "tabletopic_schema_registry_request_seconds",
            "Schema registry HTTP request latency",
            registry=metrics,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def observe(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            self.latency.observe(time.perf_counter() - start)
            self.requests.labels(scope.get("method", "?"), str(status)).inc()


def create_app(
    config: Config,
    registry: SchemaRegistry | None = None,
    lifespan: Lifespan | None = None,
    metrics: CollectorRegistry | None = None,
) -> FastAPI:
    """Build the registry app.

    Args:
        config: node configuration (``schema.registry.*`` keys).
        registry: the registry to serve; ``None`` builds one over ``metadata.url`` in the lifespan
            (standalone use), otherwise the caller owns its start and stop.
        lifespan: an extra lifespan run inside the app's own.
        metrics: where to count requests (the node's registry); ``None`` counts nothing.
    """

    @asynccontextmanager
    async def app_lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = None
        if registry is None:
            from tabletopic.schema_registry.component import open_registry

            engine, app.state.registry = open_registry(config)
        else:
            app.state.registry = registry
        try:
            if lifespan is not None:
                async with lifespan(app):
                    yield
            else:
                yield
        finally:
            if engine is not None:
                app.state.registry.close()
                engine.dispose()

    app = FastAPI(
        title="tabletopic schema registry",
        default_response_class=RegistryJSONResponse,
        lifespan=app_lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.registry = registry
    install_error_handlers(app)
    setup_routers(app)
    app.add_middleware(BodyLimit, max_bytes=config.get(sr_settings.MAX_REQUEST_BYTES))
    app.add_middleware(RawPathRouting)
    if metrics is not None:
        app.add_middleware(RequestMetrics, metrics=metrics)
    return app
