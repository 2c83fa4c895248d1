"""The admin HTTP API: ``/health``, ``/metrics`` (Prometheus text of every subsystem's metrics),
``/v1/cluster`` and ``/v1/topics``, with OpenAPI docs at ``/docs``.

Built from routers: the core ones here plus the routers the node's assembly hands over (the table
pipeline's ``/v1/tables``), asked for when the admin API starts, which is why it starts last.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from tabletopic import settings
from tabletopic.admin.topics import TopicApiError, topics_router
from tabletopic.broker.component import BrokerComponent
from tabletopic.broker.security.http_auth import ADMIN_API, https_options
from tabletopic.component import NotStarted
from tabletopic.config import Config
from tabletopic.http_service import HttpService

log = logging.getLogger(__name__)

# The names of the node's parts that have started, in start order.
StartedParts = Callable[[], list[str]]


def core_router(
    metrics_registry: CollectorRegistry, broker: BrokerComponent, parts: StartedParts
) -> APIRouter:
    router = APIRouter()

    @router.get("/health", tags=["ops"], summary="Liveness: every component has started")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "components": parts()}

    @router.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus metrics of all subsystems",
        response_class=PlainTextResponse,
    )
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(metrics_registry), media_type=CONTENT_TYPE_LATEST)

    @router.get("/v1/cluster", tags=["cluster"], summary="Cluster id, this node and its listeners")
    async def cluster() -> dict[str, Any]:
        try:
            service = broker.service
        except NotStarted:
            return {"cluster_id": None, "brokers": [], "topics": 0, "partitions": 0}
        return {
            "cluster_id": service.cluster_id,
            "controller_id": service.node_id,
            "brokers": [
                {
                    "node_id": service.node_id,
                    "listeners": [
                        {"protocol": e.protocol, "host": e.host, "port": e.port}
                        for e in service.advertised.values()
                    ],
                }
            ],
            "topics": len(service.topics),
            "partitions": service.topics.partition_count(),
        }

    return router


def create_app(
    metrics_registry: CollectorRegistry,
    broker: BrokerComponent,
    parts: StartedParts,
    routers: list[APIRouter],
) -> FastAPI:
    """The admin app: core routers, topic routers and the routers the assembly handed over."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield

    app = FastAPI(title="tabletopic admin API", version="1", lifespan=lifespan)

    @app.exception_handler(TopicApiError)
    async def topic_error(_request: Request, exc: TopicApiError) -> JSONResponse:
        return JSONResponse(
            status_code=exc.status, content={"error_code": exc.error_code, "message": exc.message}
        )

    app.include_router(core_router(metrics_registry, broker, parts))
    app.include_router(topics_router(broker))
    for router in routers:
        app.include_router(router)
    return app


class AdminApiComponent:
    """The admin HTTP API of a node.

    Args:
        parts: names of the node's started parts, for ``/health``.
        routers: more routers to serve, asked for at start (they need started parts).
    """

    name = "admin-api"

    def __init__(
        self,
        config: Config,
        metrics: CollectorRegistry,
        broker: BrokerComponent,
        parts: StartedParts,
        routers: Callable[[], list[APIRouter]] = list,
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._broker = broker
        self._parts = parts
        self._routers = routers
        self._service: HttpService | None = None

    async def start(self) -> None:
        listener = self._config.get(settings.ADMIN_LISTENER)
        if not listener:
            log.info("admin API disabled (admin.listener is empty)")
            return
        app = create_app(self._metrics, self._broker, self._parts, self._routers())
        auth = self._broker.http_authenticator()
        served = auth.wrap(app, ADMIN_API) if auth is not None else app
        self._service = HttpService("admin API", served, listener, https_options(self._config, listener))
        await self._service.start()

    async def stop(self) -> None:
        if self._service is not None:
            await self._service.stop()
            self._service = None
