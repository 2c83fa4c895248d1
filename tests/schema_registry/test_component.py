"""The registry joins a node as a component: HTTP on its listener and the in-process lookup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from tabletopic import database
from tabletopic.config import Config
from tabletopic.http_auth import HttpAuthenticator, PlainHttp, Tokens
from tabletopic.schema_registry.component import RegistryComponent
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


async def test_component_serves_http_and_offers_the_lookup(tmp_path: Path) -> None:
    port = free_port()
    config = Config({"data.dir": str(tmp_path), "schema.registry.listener": f"http://127.0.0.1:{port}"})
    metrics = CollectorRegistry()
    engine = database.create_engine(database.default_url(tmp_path))
    component = RegistryComponent(
        config, engine, metrics, cluster_id=lambda: "cluster-1", http_security=PlainHttp()
    )
    await component.start()
    try:
        schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            response = await http.post("/subjects/t-value/versions", json={"schema": schema})
            assert response.json() == {"id": 1}
        lookup = component.lookup
        assert lookup.by_id(1).schema == json.dumps(json.loads(schema), separators=(",", ":"))
        assert lookup.latest("t-value").version == 1
        requests = metrics.get_sample_value(
            "tabletopic_schema_registry_requests_total", {"method": "POST", "status": "200"}
        )
        assert requests == 1.0
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            scope = (await http.get("/v1/metadata/id")).json()["scope"]
        assert scope["clusters"]["kafka-cluster"] == "cluster-1"
    finally:
        await component.stop()
        engine.dispose()


class _ReadersOnly:
    """An :class:`~tabletopic.http_auth.HttpSecurity` of the registry's own: what the assembly
    hands it decides who gets in (the registry knows no broker to ask)."""

    def authenticator(self) -> HttpAuthenticator | None:
        users = {"reader": "r-pw"}
        return HttpAuthenticator(lambda u, p: users.get(u) == p, set(), "test", Tokens(b"k" * 32, 60))

    def https_options(self, listener: str) -> dict[str, Any]:
        return {}


async def test_component_guards_its_api_with_the_security_it_is_handed(tmp_path: Path) -> None:
    port = free_port()
    config = Config({"data.dir": str(tmp_path), "schema.registry.listener": f"http://127.0.0.1:{port}"})
    engine = database.create_engine(database.default_url(tmp_path))
    component = RegistryComponent(config, engine, CollectorRegistry(), http_security=_ReadersOnly())
    await component.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            anonymous = await http.get("/subjects")
            assert anonymous.status_code == 401
            assert anonymous.json()["error_code"] == 40101  # the registry's own error shape
            assert (await http.get("/subjects", auth=("reader", "r-pw"))).json() == []
            schema = json.dumps({"type": "string"})
            refused = await http.post(
                "/subjects/s/versions", json={"schema": schema}, auth=("reader", "r-pw")
            )
            assert refused.status_code == 403
    finally:
        await component.stop()
        engine.dispose()
