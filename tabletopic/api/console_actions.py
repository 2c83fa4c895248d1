"""The console's message browser page and its state-changing forms: produce a test message, reset
a group's offsets, delete a topic, add or remove ACLs and SCRAM users.

Every action needs a confirmation the server checks, not only the page: a reset names the group
again and a deletion the topic again (typed by the operator), and every POST must come from the
console's own page (:func:`tabletopic.api.origin.same_origin`). The work itself is the admin
API's (:mod:`tabletopic.api.messages`), so the console and ``/v1/...`` behave alike.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute

from tabletopic.api.messages import (
    AclEntry,
    MessageBrowser,
    OffsetReset,
    ProduceMessage,
    ScramUser,
)
from tabletopic.api.origin import same_origin
from tabletopic.api.topics import TopicApiError

Render = Callable[..., HTMLResponse]
MAX_FORM_BYTES = 1 << 20  # a test message, a few fields: nothing a form here sends comes near


def _note(text: str, error: bool = False) -> HTMLResponse:
    kind = "error" if error else "note"
    stamp = time.strftime("%H:%M:%S")
    return HTMLResponse(f'<span class="{kind}">{html.escape(text)} ({stamp})</span>')


class _Refused(Exception):
    """An action answered before its work: its form came from another site's page, or its
    confirmation does not repeat the name. Raised while the form is read, so an action reads its
    form in one line, and answered with ``response`` by :class:`_ActionRoute`."""

    def __init__(self, response: HTMLResponse) -> None:
        super().__init__()
        self.response = response


class _ActionRoute(APIRoute):
    """The routes of the console's actions and pages here: a :class:`_Refused` raised while one
    answers is its answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except _Refused as refused:
                return refused.response

        return answer


async def _form(request: Request) -> dict[str, str]:
    """An URL-encoded form (what htmx posts) as a dict of the last value of each field, refused
    (:class:`_Refused`) when another site's page sent it: every console action checks that first.
    Parsed here rather than with Starlette's ``request.form()``, which needs python-multipart."""
    if not same_origin({k.lower(): v for k, v in request.headers.items()}, required=True):
        raise _Refused(HTMLResponse("refused: not sent by this console's own page", status_code=403))
    body = (await request.body())[:MAX_FORM_BYTES].decode("utf-8", errors="replace")
    return {key: values[-1] for key, values in parse_qs(body, keep_blank_values=True).items()}


def _confirmed(data: dict[str, str], name: str, undone: str, what: str) -> dict[str, str]:
    """The form of a destructive action, refused with a note when its confirm field does not
    repeat ``name`` (``undone``: "not deleted", say; ``what``: "the topic's name")."""
    if str(data.get("confirm") or "") != name:
        raise _Refused(_note(f"{undone}: type {what} ({name}) to confirm", error=True))
    return data


def _int(value: Any) -> int | None:
    text = str(value or "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise TopicApiError(400, "INVALID_REQUEST", f"{text!r} is not a whole number") from None


def _timestamp(value: Any) -> int | None:
    """Milliseconds since the epoch, or an ISO 8601 time (``2026-01-31T10:00``, local time if no
    zone) as the browser's datetime field sends it."""
    text = str(value or "").strip()
    if not text:
        return None
    if text.isdigit():
        return int(text)
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise TopicApiError(400, "INVALID_REQUEST", f"{text!r} is neither milliseconds nor a date") from None


def actions_router(browser: MessageBrowser, render: Render) -> APIRouter:
    router = APIRouter(include_in_schema=False, route_class=_ActionRoute)

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    @router.get("/messages", response_class=HTMLResponse)
    async def messages(
        request: Request,
        topic: str = "",
        partition: str = "0",
        offset: str = "",
        timestamp: str = "",
        limit: str = "20",
    ) -> HTMLResponse:
        fragment = request.headers.get("HX-Request") == "true" and "HX-Boosted" not in request.headers
        service = browser.sources.broker_service()
        names = sorted(t.name for t in service.topics.all()) if service is not None else []
        form = {
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "timestamp": timestamp,
            "limit": limit,
        }
        result: dict[str, Any] | None = None
        error = None
        if topic and not fragment:  # the page's periodic refresh does not read Kafka again
            try:
                result = await run(
                    browser.read,
                    topic,
                    _int(partition) or 0,
                    _int(offset),
                    _timestamp(timestamp),
                    _int(limit) or 20,
                )
            except TopicApiError as exc:
                error = f"{exc.error_code}: {exc.message}"
        return render(request, "messages", topics=names, form=form, result=result, error=error)

    @router.post("/messages/produce", response_class=HTMLResponse)
    async def produce(request: Request) -> Response:
        data = await _form(request)
        headers = {}
        for line in str(data.get("headers") or "").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip():
                headers[key.strip()] = value.strip()
        body = ProduceMessage(
            key=str(data.get("key")) if data.get("key") else None,
            value=str(data.get("value") or ""),
            headers=headers,
            partition=_int(data.get("partition")),
        )
        try:
            done = await run(browser.produce, str(data.get("topic") or ""), body)
        except TopicApiError as exc:
            return _note(f"not produced: {exc.error_code}: {exc.message}", error=True)
        return _note(f"produced to {done['topic']} partition {done['partition']} at offset {done['offset']}")

    @router.post("/groups/{group_id:path}/reset", response_class=HTMLResponse)
    async def reset(request: Request, group_id: str) -> Response:
        data = _confirmed(await _form(request), group_id, "not reset", "the group's name")
        to = str(data.get("to") or "")
        value = _timestamp(data.get("value")) if to == "timestamp" else _int(data.get("value"))
        try:
            body = OffsetReset.model_validate(
                {"topic": str(data.get("topic") or ""), "to": to, "value": value}
            )
        except ValueError as exc:
            return _note(f"not reset: {exc}", error=True)
        try:
            done = await run(browser.reset_offsets, group_id, body)
        except TopicApiError as exc:
            return _note(f"not reset: {exc.error_code}: {exc.message}", error=True)
        offsets = ", ".join(f"{p}: {o}" for p, o in sorted(done["offsets"].items()))
        return _note(f"offsets of {group_id} on {body.topic} reset to {to} ({offsets})")

    @router.post("/topics/{name}/delete", response_class=HTMLResponse)
    async def delete_topic(request: Request, name: str) -> Response:
        _confirmed(await _form(request), name, "not deleted", "the topic's name")
        service = browser.sources.broker_service()
        if service is None:
            return _note("not deleted: the broker is not running", error=True)
        try:
            await service.delete_topic(name)
        except Exception as exc:
            return _note(f"not deleted: {exc}", error=True)
        return _note(f"topic {name} deleted")

    @router.get("/security", response_class=HTMLResponse)
    async def security(request: Request) -> HTMLResponse:
        acls: list[dict[str, Any]] | None = None
        users: list[dict[str, Any]] | None = None
        acl_error = users_error = None
        try:
            acls = await run(browser.acls)
        except TopicApiError as exc:
            acl_error = exc.message
        try:
            users = await run(browser.scram_users)
        except TopicApiError as exc:
            users_error = exc.message
        return render(
            request, "security", acls=acls, users=users, acl_error=acl_error, users_error=users_error
        )

    @router.post("/security/acls/{action}", response_class=HTMLResponse)
    async def acl(request: Request, action: str) -> Response:
        data = await _form(request)
        try:
            entry = AclEntry.model_validate({k: str(v) for k, v in data.items() if v != ""})
        except ValueError as exc:
            return _note(f"ACL not changed: {exc}", error=True)
        try:
            done = await run(browser.change_acl, entry, action == "delete")
        except TopicApiError as exc:
            return _note(f"ACL not changed: {exc.message}", error=True)
        if action == "delete":
            return _note(f"{done['deleted']} ACL(s) deleted")
        return _note(
            f"ACL added: {entry.principal} {entry.permission} {entry.operation} on {entry.resource_name}"
        )

    @router.post("/security/users/{action}", response_class=HTMLResponse)
    async def user(request: Request, action: str) -> Response:
        data = await _form(request)
        name = str(data.get("name") or "")
        try:
            if action == "delete":
                _confirmed(data, name, "not deleted", "the user's name")
                await run(browser.delete_scram_user, name)
                return _note(f"user {name} deleted")
            user = ScramUser.model_validate(
                {
                    "name": name,
                    "password": str(data.get("password") or ""),
                    "mechanism": str(data.get("mechanism") or "SCRAM-SHA-256"),
                }
            )
            await run(browser.set_scram_user, user)
        except ValueError as exc:
            return _note(f"user not changed: {exc}", error=True)
        except TopicApiError as exc:
            return _note(f"user not changed: {exc.message}", error=True)
        return _note(f"user {name} set")

    return router
