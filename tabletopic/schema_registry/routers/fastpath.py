"""The hot read, answered before FastAPI: ``GET /schemas/ids/{id}``.

Every deserializer that meets a schema id it has not seen asks this, and a fleet of short-lived
clients asks it constantly. Through FastAPI the answer costs routing, dependency solving and a hop
to the thread pool on top of the database read; here a known id is answered from a cache of the
rendered bytes on the event loop, and an unknown one is read once in the thread pool and cached.

An id names one schema forever (ids are never reused), so a cached answer can only go stale when
the schema is permanently deleted: the cache empties whenever this node deletes one, and entries
expire after :data:`TTL_SECONDS` so other nodes' permanent deletes are seen too. Anything this path
does not handle (errors, other query parameters) goes to the app unchanged, so its answers stay
the app's own.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from urllib.parse import parse_qsl

import anyio.to_thread

from tabletopic.schema_registry.contexts import DEFAULT_CONTEXT, context_of
from tabletopic.schema_registry.errors import RegistryError
from tabletopic.schema_registry.lru import LRU
from tabletopic.schema_registry.registry import SchemaRegistry
from tabletopic.schema_registry.routers.middleware import ASGIApp, Receive, Scope, Send
from tabletopic.schema_registry.routers.models import CONTENT_TYPE, schema_fields

_BY_ID = re.compile(r"^/schemas/ids/([1-9][0-9]{0,9})$")
_QUERY_KEYS = frozenset({"subject", "format"})
TTL_SECONDS = 60.0
MAX_ENTRIES = 4096
MAX_BODY = 64 * 1024  # larger answers are not kept (bounds the cache's memory)


class FastLookups:
    """ASGI layer answering ``GET /schemas/ids/{id}`` (optionally ``subject``/``format``) from a
    cache of rendered answers; every other request passes through to ``app``."""

    def __init__(self, app: ASGIApp, registry: Callable[[], SchemaRegistry | None]) -> None:
        self.app = app
        self._registry = registry
        self._cache: LRU[tuple[int, str], tuple[float, bytes]] = LRU(MAX_ENTRIES)
        self._removals = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            match = _BY_ID.match(scope["path"])
            registry = self._registry() if match else None
            if match and registry is not None:
                fmt = _format(scope.get("query_string", b""))
                if fmt is not None:
                    body = await self._answer(registry, int(match.group(1)), fmt)
                    if body is not None:
                        await _send_json(send, body)
                        return
        await self.app(scope, receive, send)

    async def _answer(self, registry: SchemaRegistry, schema_id: int, fmt: str) -> bytes | None:
        if registry.removals != self._removals:
            self._removals = registry.removals
            self._cache = LRU(MAX_ENTRIES)
        key = (schema_id, fmt)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < TTL_SECONDS:
            return cached[1]
        try:
            body = await anyio.to_thread.run_sync(_render, registry, schema_id, fmt)
        except RegistryError:
            return None  # the app answers the error in its own words
        if len(body) <= MAX_BODY:
            self._cache.put(key, (now, body))
        return body


def _format(query: bytes) -> str | None:
    """The ``format`` asked for ("" for none), or ``None`` when the query has other parameters."""
    if not query:
        return ""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    if any(k not in _QUERY_KEYS for k, _ in pairs):
        return None
    if any(k == "subject" and context_of(v) != DEFAULT_CONTEXT for k, v in pairs):
        return None  # an id in another context: the cache holds the default context's
    return next((v for k, v in pairs if k == "format"), "")


def _render(registry: SchemaRegistry, schema_id: int, fmt: str) -> bytes:
    row = registry.schema(schema_id)
    body = schema_fields(row.schema_type, registry.formatted(row, fmt or None), row.references, row.contract)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


async def _send_json(send: Send, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", CONTENT_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
