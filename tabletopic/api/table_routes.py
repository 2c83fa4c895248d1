"""``/v1/tables`` on the admin API: the state of every table topic's pipeline, and its controls.

Any broker of a cluster answers for every table topic: those it coordinates itself, the others by
asking their coordinators (:mod:`tabletopic.api.cluster_tables`), so ``tabletopic tables`` works
against whichever broker ``admin.listener`` names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from tabletopic.api.cluster_tables import FORWARDED, PeerError, TablePeers

if TYPE_CHECKING:
    from tabletopic.table.coordinator import TableCoordinator

# What each control answers, as before clusters: {"triggered": topic} and so on.
_DONE = {"commit": "triggered", "pause": "paused", "resume": "resumed"}


def tables_router(coordinator: TableCoordinator, peers: TablePeers) -> APIRouter:
    router = APIRouter(prefix="/v1/tables", tags=["tables"])

    async def local(topic: str) -> dict[str, Any] | None:
        # Lag is measured now and rows/commits come from the table (not from process memory).
        status = await coordinator.live_status(topic)
        return None if status is None else {**status.as_dict(), "coordinator": peers.node_id}

    async def elsewhere(request: Request, topic: str, path: str) -> JSONResponse:
        """The answer of ``topic``'s coordinator on another broker, or why there is none."""
        owner = peers.coordinator_of(topic) if peers.clustered() else None
        if owner is None or topic not in peers.table_topics():
            raise HTTPException(404, f"{topic} is not a table topic")
        if request.headers.get(FORWARDED) or owner == peers.node_id:
            # Asked by a broker that took this one for the coordinator, or this broker has just
            # become it: either way the pipeline is moving here or away.
            raise HTTPException(
                503, f"{topic}'s table coordinator is moving to broker {owner}: ask again in a few seconds"
            )
        urls = await peers.admin_urls()
        try:
            answer = await peers.ask(owner, urls.get(owner), request.method, path, request.headers)
        except PeerError as exc:
            raise HTTPException(
                503, f"{topic} is coordinated by broker {owner}, which cannot be asked: {exc}"
            ) from exc
        if answer.status_code == 404:
            raise HTTPException(
                503, f"{topic}'s table coordinator is starting on broker {owner}: ask again in a few seconds"
            )
        return JSONResponse(answer.body, status_code=answer.status_code)

    @router.get("", summary="Every table topic of the cluster with its table, commit and lag status")
    async def list_tables(request: Request) -> list[dict[str, Any]]:
        mine = [row for name in sorted(coordinator.pipelines) if (row := await local(name)) is not None]
        if request.headers.get(FORWARDED):
            return mine
        return await peers.listing(mine, request.headers)

    @router.get(
        "/{topic}",
        summary="One table topic's pipeline status (asked of its coordinator)",
        response_model=None,
    )
    async def describe_table(request: Request, topic: str) -> dict[str, Any] | JSONResponse:
        found = await local(topic)
        if found is not None:
            return found
        return await elsewhere(request, topic, f"/v1/tables/{topic}")

    async def control(request: Request, topic: str, action: str) -> dict[str, Any] | JSONResponse:
        if topic not in coordinator.pipelines:
            return await elsewhere(request, topic, f"/v1/tables/{topic}/{action}")
        if action == "commit":
            coordinator.trigger(topic)
        elif action == "pause":
            coordinator.pause(topic)
        else:
            coordinator.resume(topic)
        return {_DONE[action]: topic}

    @router.post("/{topic}/commit", summary="Run the topic's next ingest cycle now", response_model=None)
    async def commit_now(request: Request, topic: str) -> dict[str, Any] | JSONResponse:
        return await control(request, topic, "commit")

    @router.post(
        "/{topic}/pause",
        summary="Start no more ingest cycles for the topic until resumed",
        response_model=None,
    )
    async def pause(request: Request, topic: str) -> dict[str, Any] | JSONResponse:
        return await control(request, topic, "pause")

    @router.post(
        "/{topic}/resume", summary="Resume a paused topic, or retry a FAILED one, now", response_model=None
    )
    async def resume(request: Request, topic: str) -> dict[str, Any] | JSONResponse:
        return await control(request, topic, "resume")

    return router
