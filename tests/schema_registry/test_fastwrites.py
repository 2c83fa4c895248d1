"""Plain registrations and compatibility checks are answered before FastAPI: the app must never see
them, must see every other shape with its body intact, and both paths must answer alike."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tabletopic.config import Config
from tabletopic.schema_registry.opening import open_registry
from tabletopic.schema_registry.routers.fastwrites import FastWrites
from tabletopic.schema_registry.routers.middleware import Receive, Scope, Send


def schema(*fields: str, default: bool = True) -> str:
    body: list[dict[str, Any]] = [
        {"name": f, "type": "int", **({"default": 0} if default else {})} for f in fields
    ]
    return json.dumps({"type": "record", "name": "R", "fields": body})


class RecordingApp:
    """Stands in for the FastAPI app: remembers what reached it and answers 299."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = (await receive())["type"].rsplit(".", 1)[-1]
                await send({"type": f"lifespan.{event}.complete"})
                if event == "shutdown":
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.seen.append((scope["path"], body))
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def layer(tmp_path: Path) -> Iterator[tuple[TestClient, RecordingApp]]:
    engine, registry = open_registry(Config({"data.dir": str(tmp_path / "data")}))
    app = RecordingApp()
    try:
        with TestClient(FastWrites(app, lambda: registry, 65536)) as client:
            yield client, app
    finally:
        registry.close()
        engine.dispose()


def test_plain_requests_never_reach_the_app(layer: tuple[TestClient, RecordingApp]) -> None:
    client, app = layer
    assert client.post("/subjects/s/versions", json={"schema": schema("a")}).json() == {"id": 1}
    # What confluent-kafka sends: the type and empty references spelled out.
    sent = {"schema": schema("a", "b"), "schemaType": "AVRO", "references": [], "metadata": None}
    assert client.post("/subjects/s/versions?normalize=false", json=sent).json() == {"id": 2}
    check = client.post(
        "/compatibility/subjects/s/versions/latest?verbose=true", json={"schema": schema("c", default=False)}
    )
    assert check.status_code == 200 and check.json()["is_compatible"] is False
    assert check.json()["messages"][-1] == "{compatibility: 'BACKWARD'}"
    assert client.post("/compatibility/subjects/s/versions", json={"schema": schema("a")}).json() == {
        "is_compatible": True
    }
    refused = client.post("/subjects/s/versions", json={"schema": schema("z", default=False)})
    assert refused.status_code == 409 and refused.json()["error_code"] == 40901
    found = client.post("/subjects/s?deleted=false", json={"schema": schema("a", "b")}).json()
    assert (found["subject"], found["version"], found["id"]) == ("s", 2, 2)
    missing = client.post("/compatibility/subjects/nope/versions/1", json={"schema": schema("a")})
    assert missing.status_code == 404 and missing.json()["error_code"] == 40401
    assert app.seen == []


def test_every_other_shape_reaches_the_app_with_its_body(layer: tuple[TestClient, RecordingApp]) -> None:
    client, app = layer
    plain = json.dumps({"schema": schema("a")}).encode()
    others = [
        ("/subjects/s/versions", json.dumps({"schema": schema("a"), "ruleSet": {}}).encode()),
        (
            "/subjects/s/versions",
            json.dumps(
                {"schema": schema("a"), "references": [{"name": "n", "subject": "x", "version": 1}]}
            ).encode(),
        ),
        ("/subjects/s/versions", json.dumps({"schema": schema("a"), "id": 7}).encode()),
        ("/subjects/s/versions", b"{not json"),
        ("/subjects/s/versions", json.dumps({"schema": 5}).encode()),
        ("/subjects/s/versions?normalize=yes", plain),
        ("/subjects/s/versions?verbose=true", plain),  # not a registration parameter
        ("/subjects/a%2Fb/versions", plain),
        ("/subjects/:.ctx:s/versions", plain),
        ("/subjects/s?verbose=true", plain),  # not a lookup parameter
    ]
    for path, body in others:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 299, path
    assert [body for _path, body in app.seen] == [body for _path, body in others]


def test_fast_and_app_answers_are_the_same(api: TestClient) -> None:
    """Through the real app: the same requests with an extra query parameter the fast path leaves
    to FastAPI (``?x=1``, ignored by the app) answer byte for byte alike."""
    requests = [
        ("/subjects/same/versions", {"schema": schema("a")}),
        ("/subjects/same/versions", {"schema": schema("a")}),
        ("/subjects/same/versions", {"schema": schema("b", default=False)}),
        ("/subjects/same/versions", {"schema": "{"}),
        ("/subjects/same/versions", {"schema": ""}),
        ("/subjects/%20/versions", {"schema": schema("a")}),
        ("/compatibility/subjects/same/versions/latest?verbose=true", {"schema": schema("b", default=False)}),
        ("/compatibility/subjects/same/versions/9", {"schema": schema("a")}),
        ("/compatibility/subjects/same/versions/x", {"schema": schema("a")}),
        ("/compatibility/subjects/none/versions", {"schema": schema("a")}),
        ("/subjects/same", {"schema": schema("a")}),
        ("/subjects/same?deleted=true", {"schema": schema("a")}),
        ("/subjects/same", {"schema": schema("q")}),
        ("/subjects/none", {"schema": schema("a")}),
        ("/subjects/same", {"schema": "{"}),
    ]
    for path, body in requests:
        fast = api.post(path, json=body)
        slow = api.post(path + ("&" if "?" in path else "?") + "x=1", json=body)
        assert (fast.status_code, fast.content) == (slow.status_code, slow.content), path
        assert fast.headers["content-type"] == slow.headers["content-type"]
