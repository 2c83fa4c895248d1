"""The console's state-changing forms refuse, in process (no node): a form from another site's page
is answered 403 and a destructive action whose confirmation does not repeat the name is answered
with a note, and in neither case is the action done."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.testclient import TestClient

from tabletopic.api.console_actions import actions_router


class _Broker:
    def __init__(self, done: list[str]) -> None:
        self.done = done

    async def delete_topic(self, name: str) -> None:
        self.done.append(f"topic {name}")


class _Browser:
    def __init__(self) -> None:
        self.done: list[str] = []
        self.sources = SimpleNamespace(broker_service=lambda: _Broker(self.done))

    def delete_scram_user(self, name: str) -> dict[str, Any]:
        self.done.append(f"user {name}")
        return {}


def _console(browser: _Browser) -> TestClient:
    console = APIRouter()  # included twice over, as the console includes the actions
    console.include_router(actions_router(browser, lambda *_, **__: HTMLResponse("page")))  # type: ignore[arg-type]
    app = FastAPI()
    app.include_router(console)
    return TestClient(app, base_url="http://console")


def test_a_form_from_another_site_or_without_the_typed_name_does_nothing() -> None:
    browser = _Browser()
    console, own = _console(browser), {"Origin": "http://console"}
    cross_site = console.post(
        "/topics/t/delete", data={"confirm": "t"}, headers={"Origin": "http://evil.example"}
    )
    assert cross_site.status_code == 403 and "refused" in cross_site.text
    wrong = console.post("/topics/t/delete", data={"confirm": "u"}, headers=own)
    assert wrong.status_code == 200 and "not deleted: type the topic&#x27;s name (t)" in wrong.text
    not_user = console.post("/security/users/delete", data={"name": "u", "confirm": "t"}, headers=own)
    assert "not deleted: type the user&#x27;s name (u)" in not_user.text
    assert browser.done == []
    assert "topic t deleted" in console.post("/topics/t/delete", data={"confirm": "t"}, headers=own).text
    user = console.post("/security/users/delete", data={"name": "u", "confirm": "u"}, headers=own)
    assert "user u deleted" in user.text
    assert browser.done == ["topic t", "user u"]
