"""Registry fixtures: an in-process app over a fresh database per test — SQLite and PostgreSQL —
(real app and database, no socket) and one registry process per session for real-client tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tabletopic.config import Config
from tabletopic.schema_registry.api import create_app
from tests.schema_registry.server import RegistryProcess


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def registry_config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """Every API behaviour test runs once per metadata database engine."""
    values = {"data.dir": str(tmp_path / "data"), "schema.registry.max.request.bytes": "65536"}
    if request.param == "postgres":
        values["metadata.url"] = request.getfixturevalue("postgres_url")
    return Config(values)


@pytest.fixture
def api(registry_config: Config) -> Iterator[TestClient]:
    with TestClient(create_app(registry_config), raise_server_exceptions=False) as client:
        client.headers["Content-Type"] = "application/vnd.schemaregistry.v1+json"
        yield client


@pytest.fixture(scope="session")
def registry_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    server = RegistryProcess(tmp_path_factory.mktemp("registry")).start()
    yield server
    server.stop()
