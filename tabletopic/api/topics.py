"""``/v1/topics``: list, create, describe (partitions with offsets and stream ids), configs, delete.
A thin layer over the broker service, the same one the Kafka admin APIs use."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Response
from kio.schema.errors import ErrorCode
from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from tabletopic.broker.component import BrokerComponent
from tabletopic.broker.service import BrokerService
from tabletopic.component import NotStarted

_HTTP_STATUS = {
    ErrorCode.unknown_topic_or_partition: 404,
    ErrorCode.topic_already_exists: 409,
}


class TopicApiError(Exception):
    """Rendered as ``{"error_code": "<kafka error name>", "message": ...}``."""

    def __init__(self, status: int, error_code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


class CreateTopic(BaseModel):
    name: str
    partitions: int | None = Field(default=None, description="Default: num.partitions")
    configs: dict[str, str] = Field(default_factory=dict)


class ConfigChange(BaseModel):
    set: dict[str, str] = Field(default_factory=dict, description="Keys to set")
    delete: list[str] = Field(default_factory=list, description="Explicit keys to remove")


def _translate(exc: Exception) -> TopicApiError:
    from tabletopic.broker.topics import TopicError

    if isinstance(exc, TopicError):
        return TopicApiError(_HTTP_STATUS.get(exc.error_code, 400), exc.error_code.name.upper(), str(exc))
    raise exc


def describe(broker: BrokerService, name: str, engine: Engine | None = None) -> dict[str, Any]:
    """A topic with every partition's real leader and high watermark (in a cluster, read from the
    metadata database: see :mod:`tabletopic.api.cluster_view`). Blocking when ``engine`` is given."""
    from tabletopic.api.cluster_view import partitions_of

    topic = broker.topics.get(name)
    if topic is None:
        raise TopicApiError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name} does not exist")
    return {
        "name": topic.name,
        "topic_id": str(topic.topic_id),
        "partitions": partitions_of(broker, engine, topic),
        "configs": broker.effective_topic_configs(topic),
        "explicit_configs": dict(topic.configs),
    }


def topics_router(component: BrokerComponent, engine: Engine | None = None) -> APIRouter:
    router = APIRouter(prefix="/v1/topics", tags=["topics"])

    def broker() -> BrokerService:
        try:
            return component.service
        except NotStarted:
            raise TopicApiError(503, "BROKER_NOT_AVAILABLE", "the broker is not running") from None

    @router.get("", summary="All topics")
    async def list_topics() -> list[dict[str, Any]]:
        return [
            {"name": t.name, "topic_id": str(t.topic_id), "partitions": t.partition_count}
            for t in sorted(broker().topics.all(), key=lambda t: t.name)
        ]

    @router.post("", status_code=201, summary="Create a topic")
    async def create_topic(body: CreateTopic) -> dict[str, Any]:
        service = broker()
        try:
            await service.create_topic(body.name, body.partitions, body.configs)
        except Exception as exc:
            raise _translate(exc) from exc
        return await asyncio.to_thread(describe, service, body.name, engine)

    @router.get("/{name}", summary="A topic with its partitions, offsets and configs")
    async def get_topic(name: str) -> dict[str, Any]:
        return await asyncio.to_thread(describe, broker(), name, engine)

    @router.get("/{name}/configs", summary="Effective configs of a topic")
    async def get_configs(name: str) -> dict[str, str]:
        return describe(broker(), name)["configs"]  # type: ignore[no-any-return]

    @router.patch("/{name}/configs", summary="Set and remove explicit configs of a topic")
    async def alter_configs(name: str, body: ConfigChange) -> dict[str, str]:
        service = broker()
        try:
            await service.alter_topic_configs(name, body.set, tuple(body.delete))
        except Exception as exc:
            raise _translate(exc) from exc
        return describe(service, name)["configs"]  # type: ignore[no-any-return]

    @router.delete("/{name}", status_code=204, summary="Delete a topic and its data")
    async def delete_topic(name: str) -> Response:
        try:
            await broker().delete_topic(name)
        except Exception as exc:
            raise _translate(exc) from exc
        return Response(status_code=204)

    return router
