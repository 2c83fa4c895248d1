"""The admin HTTP API: ``/health``, ``/metrics`` (Prometheus text of every subsystem's metrics),
``/v1/cluster`` and ``/v1/topics``, with OpenAPI docs at ``/docs`` (Swagger UI served by the node
itself, so it works offline), and the web console at ``/`` (:mod:`tabletopic.api.console`).

Built from routers: the core ones here plus the routers the node's assembly hands over (the table
pipeline's ``/v1/tables``), asked for when the admin API starts, which is why it starts last.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from sqlalchemy.engine import Engine

from tabletopic import settings
from tabletopic.api import cluster_view
from tabletopic.api import settings as admin_settings
from tabletopic.api.console import STATIC_DIR, Console
from tabletopic.api.messages import MessageBrowser, messages_router
from tabletopic.api.origin import SAFE_METHODS, same_origin
from tabletopic.api.sources import ConsoleSources
from tabletopic.api.topics import TopicApiError, topics_router
from tabletopic.broker.component import BrokerComponent
from tabletopic.broker.security.http_auth import https_options
from tabletopic.component import NotStarted
from tabletopic.config import Config
from tabletopic.http_auth import ADMIN_API
from tabletopic.http_service import HttpService

log = logging.getLogger(__name__)

# The names of the node's parts that have started, in start order.
StartedParts = Callable[[], list[str]]


def core_router(
    metrics_registry: CollectorRegistry,
    broker: BrokerComponent,
    parts: StartedParts,
    engine: Engine | None = None,
) -> APIRouter:
    router = APIRouter()

    @router.get(
        "/health",
        tags=["ops"],
        summary="Liveness: every component has started, and the store still accepts writes",
        responses={503: {"description": "the store refuses every write until the node restarts"}},
    )
    async def health() -> JSONResponse:
        # A failed WAL refuses every append until a restart replays it: a liveness probe that sees
        # 503 restarts the node (Kafka's broker halts when its log directories fail).
        try:
            failure = broker.storage.store.write_failure
        except NotStarted:
            failure = None
        if failure is not None:
            body = {"status": "failed", "components": parts(), "reason": f"{failure}; restart the node"}
            return JSONResponse(status_code=503, content=body)
        return JSONResponse({"status": "ok", "components": parts()})

    @router.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus metrics of all subsystems",
        response_class=PlainTextResponse,
    )
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(metrics_registry), media_type=CONTENT_TYPE_LATEST)

    @router.get(
        "/v1/cluster",
        tags=["cluster"],
        summary="The whole cluster: brokers, controller, totals, timeline, the balancer's plan",
    )
    async def cluster(partitions: bool = False) -> dict[str, Any]:
        """The same answer from every broker (read from the metadata database in cluster mode; see
        docs/console.md). ``partitions=true`` adds every partition's leader and high watermark."""
        try:
            service = broker.service
        except NotStarted:
            return {"cluster_id": None, "brokers": [], "topics": 0, "partitions": 0}
        return await asyncio.to_thread(cluster_view.read, service, engine, partitions)

    return router


def create_app(
    metrics_registry: CollectorRegistry,
    broker: BrokerComponent,
    parts: StartedParts,
    routers: list[APIRouter],
    console: Console | None = None,
    engine: Engine | None = None,
    messages: MessageBrowser | None = None,
) -> FastAPI:
    """The admin app: core routers, topic routers, the routers the assembly handed over and the
    console's pages."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield

    # Swagger UI's page is served below with the node's own copy of its assets (FastAPI's default
    # loads them from a CDN: a blank page offline); ReDoc has no local copy, so it is off.
    app = FastAPI(title="tabletopic admin API", version="1", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        # Browsers ask for /favicon.ico on their own (the API docs, /metrics): answer the console's.
        return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        vendor = "/static/vendor/swagger-ui-dist"
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="tabletopic admin API",
            swagger_js_url=f"{vendor}/swagger-ui-bundle.js",
            swagger_css_url=f"{vendor}/swagger-ui.css",
            swagger_favicon_url=f"{vendor}/favicon-32x32.png",
        )

    @app.exception_handler(TopicApiError)
    async def topic_error(_request: Request, exc: TopicApiError) -> JSONResponse:
        return JSONResponse(
            status_code=exc.status, content={"error_code": exc.error_code, "message": exc.message}
        )

    @app.middleware("http")
    async def refuse_cross_site(request: Request, call_next: Any) -> Any:
        # A state-changing request sent by another site's page (see tabletopic.api.origin).
        if request.method not in SAFE_METHODS and not same_origin(
            {k.lower(): v for k, v in request.headers.items()}, required=False
        ):
            return JSONResponse(status_code=403, content={"detail": "cross-site request refused"})
        return await call_next(request)

    app.include_router(core_router(metrics_registry, broker, parts, engine))
    app.include_router(topics_router(broker, engine))
    if messages is not None:
        app.include_router(messages_router(messages))
    for router in routers:
        app.include_router(router)
    if console is not None:
        app.include_router(console.router())
    return app


@dataclass(eq=False)
class AdminApiComponent:
    """The admin HTTP API of a node.

    Args:
        parts: names of the node's started parts, for ``/health``.
        routers: more routers to serve, asked for at start (they need started parts).
        sources: the parts the web console shows; no console without them (or when
            ``admin.console.enable`` is false).
    """

    name = "admin-api"

    config: Config
    metrics: CollectorRegistry
    broker: BrokerComponent
    parts: StartedParts
    routers: Callable[[], list[APIRouter]] = list
    sources: ConsoleSources | None = None
    _service: HttpService | None = field(default=None, init=False)
    console: Console | None = field(default=None, init=False)

    async def start(self) -> None:
        listener = self.config.get(settings.ADMIN_LISTENER)
        if not listener:
            log.info("admin API disabled (admin.listener is empty)")
            return
        cfg = self.config
        auth = self.broker.http_authenticator()
        if self.sources is not None and cfg.get(admin_settings.CONSOLE_ENABLE):
            self.console = Console(
                self.sources,
                interval_s=cfg.get(admin_settings.CONSOLE_SAMPLE_INTERVAL_MS) / 1000,
                points=cfg.get(admin_settings.CONSOLE_POINTS),
                max_series=cfg.get(admin_settings.CONSOLE_MAX_SERIES),
                history_from_peers=auth is None,  # a peer would refuse this broker's call
            )
        engine = self.sources.engine if self.sources is not None else None
        browser = MessageBrowser(self.sources) if self.sources is not None else None
        app = create_app(self.metrics, self.broker, self.parts, self.routers(), self.console, engine, browser)
        served = auth.wrap(app, ADMIN_API) if auth is not None else app
        self._service = HttpService(
            "admin API", served, listener, key=settings.ADMIN_LISTENER.name, tls=https_options(cfg, listener)
        )
        await self._service.start()
        if self.console is not None:
            await self.console.start()
            log.info("console at %s/", listener.rstrip("/"))

    async def stop(self) -> None:
        if self.console is not None:
            await self.console.stop()
            self.console = None
        if self._service is not None:
            await self._service.stop()
            self._service = None
