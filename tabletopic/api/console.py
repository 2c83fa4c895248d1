"""The web console at ``/`` of the admin listener: server-rendered Jinja2 pages, refreshed in place by
htmx, with uPlot charts fed from the in-memory time series (``/console/series``). Every script and
style sheet is served by the node from ``tabletopic/api/static`` (vendored from npm with their
versions and licences in ``static/vendor/VENDORED.md``), so it works offline.

A page answers its full HTML, or with ``HX-Request`` set (htmx's periodic refresh) only its live
part; the charts are outside that part and keep their state, fetching new points themselves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from tabletopic.api import views
from tabletopic.api.console_actions import actions_router
from tabletopic.api.console_history import CLUSTER_SERIES_PATH, carry_over
from tabletopic.api.messages import MessageBrowser
from tabletopic.api.origin import same_origin
from tabletopic.api.sampler import Sampler, cluster_wide
from tabletopic.api.sources import ConsoleSources
from tabletopic.api.timeseries import SeriesRing
from tabletopic.cli_common import ago
from tabletopic.tasks import cancel_and_wait

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))
log = logging.getLogger(__name__)

PAGES = (("/", "Overview"), ("/topics", "Topics"), ("/messages", "Messages"), ("/groups", "Consumer groups"),
         ("/tables", "Table topics"), ("/schemas", "Schemas"), ("/security", "Security"))  # fmt: skip


def _bytes(value: float | int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover


def _when(epoch: float | None) -> str:
    if not epoch:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _shown(value: Any) -> str:
    """A decoded key, value or header as text: ``null``, strings as they are, the rest as JSON."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _by_partition(offsets: dict[str, int] | dict[int, int]) -> list[tuple[str | int, int]]:
    """A table's offsets per partition in partition order: the status carries its partitions as
    JSON keys (strings), which Jinja's ``dictsort`` put in text order (0, 1, 10, 11, 2, ...)."""
    return sorted(offsets.items(), key=lambda item: int(item[0]))


TEMPLATES.env.filters["bytes"] = _bytes
TEMPLATES.env.filters["by_partition"] = _by_partition
TEMPLATES.env.filters["shown"] = _shown
TEMPLATES.env.filters["when"] = _when
TEMPLATES.env.filters["ago"] = ago


class Console:
    """The console's router and its metrics sampler (started and stopped with the admin API).

    Args:
        sources: the node's parts the pages show.
        interval_s: seconds between samples of the time series.
        points, max_series: bounds of the in-memory ring (see :mod:`tabletopic.api.timeseries`).
    """

    def __init__(
        self,
        sources: ConsoleSources,
        interval_s: float = 5.0,
        points: int = 720,
        max_series: int = 1000,
        history_from_peers: bool = True,
    ) -> None:
        self.sources = sources
        self.interval_s = interval_s
        self.ring = SeriesRing(points=points, max_series=max_series)
        self.sampler = Sampler(sources, self.ring)
        # Whether to start the cluster's charts with another broker's (see console_history).
        self.history_from_peers = history_from_peers
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._sample(), name="console-sampler")

    async def _sample(self) -> None:
        peers = self.sources.peers
        if self.history_from_peers and peers is not None:
            try:
                await carry_over(self.ring, peers)
            except Exception:  # the charts start empty, as they did before
                log.exception("console: could not carry the cluster's charts over from another broker")
        await self.sampler.run(self.interval_s)

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    def _render(self, request: Request, page: str, **context: Any) -> HTMLResponse:
        fragment = request.headers.get("HX-Request") == "true" and "HX-Boosted" not in request.headers
        template = f"{page}.html"
        return TEMPLATES.TemplateResponse(
            request,
            template,
            {
                "pages": PAGES,
                "path": request.url.path,
                "query": request.url.query,
                "fragment": fragment,
                "interval_ms": int(self.interval_s * 1000),
                # A broker of a cluster: its own counters cover only what it serves (page titles say
                # so) and the whole cluster's traffic is plotted from every broker's reports.
                "clustered": self.sources.cluster_snapshot() is not None,
                **context,
            },
        )

    def router(self) -> APIRouter:
        router = APIRouter(include_in_schema=False)
        src = self.sources

        @router.get("/", response_class=HTMLResponse)
        async def overview(request: Request) -> HTMLResponse:
            data = await views.overview(src)
            data["objects"] = await views.stored_objects(src)
            return self._render(request, "overview", data=data)

        @router.get("/topics", response_class=HTMLResponse)
        async def topics(request: Request) -> HTMLResponse:
            return self._render(request, "topics", topics=await views.topics(src))

        @router.get("/topics/{name}", response_class=HTMLResponse)
        async def topic(request: Request, name: str) -> HTMLResponse:
            return self._render(request, "topic", name=name, topic=await views.topic(src, name))

        @router.get("/groups", response_class=HTMLResponse)
        async def groups(request: Request) -> HTMLResponse:
            return self._render(request, "groups", groups=await views.groups(src))

        @router.get("/groups/{group_id:path}", response_class=HTMLResponse)  # ids may hold a slash
        async def group(request: Request, group_id: str) -> HTMLResponse:
            return self._render(request, "group", group_id=group_id, group=await views.group(src, group_id))

        @router.get("/tables", response_class=HTMLResponse)
        async def tables(request: Request) -> HTMLResponse:
            listed = await views.cluster_tables(src, request.headers)
            return self._render(request, "tables", tables=listed, this_node=views.this_node(src))

        @router.get("/tables/{topic}", response_class=HTMLResponse, response_model=None)
        async def table(request: Request, topic: str) -> Response:
            found = await views.table(src, topic)
            if found is None and (elsewhere := await views.table_page_elsewhere(src, topic)) is not None:
                # Its freshness plots and controls live with its coordinator: show that broker's page.
                return RedirectResponse(elsewhere, status_code=307)
            return self._render(request, "table", topic=topic, table=found)

        @router.post("/tables/{topic}/{action}", response_class=HTMLResponse)
        async def table_action(request: Request, topic: str, action: str) -> Response:
            if not same_origin({k.lower(): v for k, v in request.headers.items()}, required=True):
                return HTMLResponse("refused: not sent by this console's own page", status_code=403)
            pipelines = src.pipelines()
            if topic not in pipelines or src.tables is None:
                return HTMLResponse(f"{topic} is not a table topic on this node", status_code=404)
            coordinator = src.tables.coordinator
            if action == "commit":
                coordinator.trigger(topic)
                message = "commit requested"
            elif action in ("pause", "resume") and hasattr(coordinator, action):
                getattr(coordinator, action)(topic)
                message = f"{action}d"
            else:
                return HTMLResponse(f"unknown action {action}", status_code=404)
            return HTMLResponse(f'<span class="note">{message} at {time.strftime("%H:%M:%S")}</span>')

        @router.get("/schemas", response_class=HTMLResponse)
        async def schemas(request: Request) -> HTMLResponse:
            return self._render(request, "schemas", subjects=await views.subjects(src))

        @router.get("/schemas/{subject:path}", response_class=HTMLResponse)
        async def schema(
            request: Request, subject: str, left: int | None = None, right: int | None = None
        ) -> HTMLResponse:
            data = await views.subject(src, subject, left, right)
            return self._render(request, "schema", subject=subject, data=data)

        router.include_router(actions_router(MessageBrowser(src), self._render))

        @router.get("/console/series")
        async def series(prefix: str = "", since: float | None = None) -> JSONResponse:
            """Aligned columns for uPlot: ``{"t": [...], name: [...]}`` of series under ``prefix``."""
            return JSONResponse(self.ring.window(prefix, since))

        @router.get(CLUSTER_SERIES_PATH)
        async def cluster_series() -> JSONResponse:
            """The series of the whole cluster, the same on every broker: a broker that starts
            begins its charts with another's (see :mod:`tabletopic.api.console_history`)."""
            return JSONResponse(self.ring.window(keep=cluster_wide))

        return router
