"""The hot writes, answered before FastAPI: ``POST /subjects/{s}/versions``, the lookup
``POST /subjects/{s}`` and the compatibility checks ``POST /compatibility/subjects/{s}/versions[/{v}]``.

Serializers register (or, with ``auto.register.schemas=false``, look up) their schema on start and
CI pipelines check every schema change; through FastAPI each
such request paid for routing, dependency solving, body validation and response rendering about
as much as the registry's own work (a cached compatibility check cost ~140 µs in the registry and
~880 µs of CPU per request over HTTP). Here the common shape of those requests — a body with just
the schema and its type, no references or contract, plain query parameters — is decoded directly
and handed to the same registry calls in the thread pool. Everything else (other keys, escaped or
context subjects, unknown query parameters, bodies of unknown length, anything that does not
decode) goes to the app untouched, so the app's answers and error codes stay the reference; the
registry's own refusals are answered in the app's error shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import anyio.to_thread

from tabletopic.schema_registry.errors import RegistryError
from tabletopic.schema_registry.model import SchemaSubmission, encode_messages, parse_version
from tabletopic.schema_registry.registry import SchemaRegistry
from tabletopic.schema_registry.routers.deps import check_subject
from tabletopic.schema_registry.routers.middleware import ASGIApp, Message, Receive, Scope, Send
from tabletopic.schema_registry.routers.models import CONTENT_TYPE
from tabletopic.schema_registry.routers.subjects import version_body

_REGISTER = re.compile(r"^/subjects/([^/%:]+)/versions$")
_LOOKUP = re.compile(r"^/subjects/([^/%:]+)$")
_COMPATIBILITY = re.compile(r"^/compatibility/subjects/([^/%:]+)/versions(?:/([^/%]+))?$")
# Keys a plain request may carry; ``None`` (or an empty reference list) for all but the schema.
_REGISTER_KEYS = frozenset({"schema", "schemaType", "references", "metadata", "ruleSet", "id", "version"})
_BOOLEANS = {"true": True, "false": False}


class FastWrites:
    """ASGI layer answering plain registrations and compatibility checks; every other request
    passes through to ``app`` with its body replayed."""

    def __init__(self, app: ASGIApp, registry: Callable[[], SchemaRegistry | None], max_bytes: int) -> None:
        self.app = app
        self._registry = registry
        self._max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        register = _REGISTER.match(path)
        lookup = None if register else _LOOKUP.match(path)
        check = None if register or lookup else _COMPATIBILITY.match(path)
        registry = self._registry() if (register or lookup or check) else None
        length = _content_length(scope)
        raw = scope.get("raw_path")
        if registry is None or length is None or length > self._max_bytes or (raw and b"%" in raw):
            await self.app(scope, receive, send)
            return
        body, receive = await _read(receive)
        known = (
            ("normalize",) if register else ("normalize", "deleted") if lookup else ("normalize", "verbose")
        )
        query = _flags(scope.get("query_string", b""), known)
        text, schema_type = _plain_schema(body)
        if query is None or text is None:
            await self.app(scope, receive, send)
            return
        submission = SchemaSubmission(text, schema_type, (), query.get("normalize", False))
        try:
            if register:
                subject = check_subject(register.group(1))
                answer: dict[str, Any] = await anyio.to_thread.run_sync(
                    _register, registry, subject, submission
                )
            elif lookup:
                subject = check_subject(lookup.group(1))
                deleted = query.get("deleted", False)
                answer = await anyio.to_thread.run_sync(_lookup, registry, subject, submission, deleted)
            else:
                assert check is not None
                subject = check_subject(check.group(1))
                version = None if check.group(2) is None else parse_version(check.group(2))
                answer = await anyio.to_thread.run_sync(
                    _check, registry, subject, version, submission, query.get("verbose", False)
                )
        except RegistryError as exc:
            await _send_json(send, exc.error.status, exc.body())
            return
        await _send_json(send, 200, answer)


def _register(registry: SchemaRegistry, subject: str, submission: SchemaSubmission) -> dict[str, Any]:
    schema_id, _version = registry.register(subject, submission)
    return {"id": schema_id}


def _lookup(
    registry: SchemaRegistry, subject: str, submission: SchemaSubmission, deleted: bool
) -> dict[str, Any]:
    return version_body(registry.lookup(subject, submission, deleted))


def _check(
    registry: SchemaRegistry, subject: str, version: int | None, submission: SchemaSubmission, verbose: bool
) -> dict[str, Any]:
    failures, level = registry.test_compatibility(subject, version, submission)
    answer: dict[str, Any] = {"is_compatible": not failures}
    if verbose:
        answer["messages"] = encode_messages(failures, level)
    return answer


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def _read(receive: Receive) -> tuple[bytes, Receive]:
    """The whole body (its length is declared and bounded), and a ``receive`` that replays it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _flags(query: bytes, known: tuple[str, ...]) -> dict[str, bool] | None:
    """Boolean query flags spelled plainly, or ``None`` when the app should parse the query."""
    flags: dict[str, bool] = {}
    for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        flag = _BOOLEANS.get(value.lower())
        if key not in known or flag is None:
            return None
        flags[key] = flag
    return flags


def _plain_schema(body: bytes) -> tuple[str | None, str | None]:
    """``(schema, schemaType)`` of a body carrying nothing else, else ``(None, None)``."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(decoded, dict) or not decoded.keys() <= _REGISTER_KEYS:
        return None, None
    text, schema_type = decoded.get("schema"), decoded.get("schemaType")
    if not isinstance(text, str) or not (schema_type is None or isinstance(schema_type, str)):
        return None, None
    if decoded.get("references") not in (None, []):
        return None, None
    if any(decoded.get(key) is not None for key in ("metadata", "ruleSet", "id", "version")):
        return None, None
    return text, schema_type


async def _send_json(send: Send, status: int, answer: dict[str, Any]) -> None:
    body = json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", CONTENT_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
