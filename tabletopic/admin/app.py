"""The admin HTTP API: ``/health``, ``/metrics`` (Prometheus text of every subsystem's metrics),
``/v1/cluster`` and ``/v1/topics``, with OpenAPI docs at ``/docs``.

Built from routers: the core ones here plus whatever other components put in
``platform.services["admin_routers"]`` (a list of FastAPI ``APIRouter``) before the admin API
starts, which is why it starts last.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tabletopic import settings
from tabletopic.admin.topics import TopicApiError, topics_router
from tabletopic.http_service import HttpService

if TYPE_CHECKING:
    from tabletopic.platform import Platform

log = logging.getLogger(__name__)

ADMIN_ROUTERS = "admin_routers"


def core_router(platform: Platform) -> APIRouter:
    router = APIRouter()

    @router.get("/health", tags=["ops"], summary="Liveness: every component has started")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "components": [c.name for c in platform.components]}

    @router.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus metrics of all subsystems",
        response_class=PlainTextResponse,
    )
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(platform.metrics), media_type=CONTENT_TYPE_LATEST)

    @router.get("/v1/cluster", tags=["cluster"], summary="Cluster id, this node and its listeners")
    async def cluster() -> dict[str, Any]:
        broker = platform.services.get("broker")
        if broker is None:
            return {"cluster_id": None, "brokers": [], "topics": 0, "partitions": 0}
        return {
            "cluster_id": broker.cluster_id,
            "controller_id": broker.node_id,
            "brokers": [
                {
                    "node_id": broker.node_id,
                    "listeners": [
                        {"protocol": e.protocol, "host": e.host, "port": e.port}
                        for e in broker.advertised.values()
                    ],
                }
            ],
            "topics": len(broker.topics),
            "partitions": broker.topics.partition_count(),
        }

    return router


def create_app(platform: Platform) -> FastAPI:
    """The admin app: core routers, topic routers and every router other components registered."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield

    app = FastAPI(title="tabletopic admin API", version="1", lifespan=lifespan)

    @app.exception_handler(TopicApiError)
    async def topic_error(_request: Request, exc: TopicApiError) -> JSONResponse:
        return JSONResponse(
            status_code=exc.status, content={"error_code": exc.error_code, "message": exc.message}
        )

    app.include_router(core_router(platform))
    app.include_router(topics_router(platform))
    for router in platform.services.get(ADMIN_ROUTERS, []):
        app.include_router(router)
    return app


class AdminApiComponent:
    name = "admin-api"

    def __init__(self) -> None:
        self._service: HttpService | None = None

    async def start(self, platform: Platform) -> None:
        listener = platform.config.get(settings.ADMIN_LISTENER)
        if not listener:
            log.info("admin API disabled (admin.listener is empty)")
            return
        self._service = HttpService("admin API", create_app(platform), listener)
        await self._service.start()

    async def stop(self) -> None:
        if self._service is not None:
            await self._service.stop()
            self._service = None
