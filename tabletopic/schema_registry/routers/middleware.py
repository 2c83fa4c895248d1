"""The ASGI layers in front of the registry app: raw-path routing, a body cap (also forcing JSON
content types) and request metrics. They run before FastAPI sees a request, which is where each of
them must act (see each class)."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.routers.deps import escape_segment
from tabletopic.schema_registry.routers.models import RegistryJSONResponse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_JSON_TYPE = re.compile(rb"^application/(?:[\w.+-]+\+)?json\b", re.IGNORECASE)


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
