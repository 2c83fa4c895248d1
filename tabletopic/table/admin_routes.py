"""``/v1/tables`` on the admin API: the state of every table topic's pipeline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, HTTPException

if TYPE_CHECKING:
    from tabletopic.table.coordinator import TableCoordinator, TopicPipeline


def tables_router(coordinator: TableCoordinator) -> APIRouter:
    router = APIRouter(prefix="/v1/tables", tags=["tables"])

    def pipeline(topic: str) -> TopicPipeline:
        found = coordinator.pipelines.get(topic)
        if found is None:
            raise HTTPException(404, f"{topic} is not a table topic on this node")
        return found

    @router.get("", summary="Every table topic with its table, commit and lag status")
    async def list_tables() -> list[dict[str, Any]]:
        # Lag is measured now and rows/commits come from the table (not from process memory).
        statuses = [await coordinator.live_status(name) for name in sorted(coordinator.pipelines)]
        return [s.as_dict() for s in statuses if s is not None]

    @router.get("/{topic}", summary="One table topic's pipeline status")
    async def describe_table(topic: str) -> dict[str, Any]:
        pipeline(topic)
        status = await coordinator.live_status(topic)
        if status is None:
            raise HTTPException(404, f"{topic} is not a table topic on this node")
        return status.as_dict()

    @router.post("/{topic}/commit", summary="Run the topic's next ingest cycle now")
    async def commit_now(topic: str) -> dict[str, Any]:
        pipeline(topic)
        coordinator.trigger(topic)
        return {"triggered": topic}

    @router.post("/{topic}/pause", summary="Start no more ingest cycles for the topic until resumed")
    async def pause(topic: str) -> dict[str, Any]:
        pipeline(topic)
        coordinator.pause(topic)
        return {"paused": topic}

    @router.post("/{topic}/resume", summary="Resume a paused topic, or retry a FAILED one, now")
    async def resume(topic: str) -> dict[str, Any]:
        pipeline(topic)
        coordinator.resume(topic)
        return {"resumed": topic}

    return router
