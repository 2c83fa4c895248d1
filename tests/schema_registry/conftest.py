"""Registry fixtures: an in-process app over a fresh database per test — SQLite and PostgreSQL —
(real app and database, no socket) and one registry process per session for real-client tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from tabletopic import database
from tabletopic.config import Config
from tabletopic.schema_registry import db
from tabletopic.schema_registry.opening import standalone_app
from tests.support.postgres import PostgresServer
from tests.support.registry_process import RegistryProcess


@pytest.fixture(scope="session")
def registry_postgres_url(postgres_server: PostgresServer) -> str:
    """One PostgreSQL database for the API tests, emptied before each (creating a database per test
    costs more than the test)."""
    return postgres_server.create_database(f"registry_{uuid.uuid4().hex[:8]}")


def empty_registry_tables(url: str) -> None:
    engine = database.create_engine(url)
    try:
        database.migrate(engine, "schema_registry", db.MIGRATIONS)
        with engine.begin() as conn:
            for table in reversed(db.metadata.sorted_tables):
                if table is not db.counters_table:
                    conn.execute(sa.delete(table))
            conn.execute(sa.update(db.counters_table).values(value=0))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def registry_config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """Every API behaviour test runs once per metadata database engine."""
    values = {"data.dir": str(tmp_path / "data"), "schema.registry.max.request.bytes": "65536"}
    if request.param == "postgres":
        url = request.getfixturevalue("registry_postgres_url")
        empty_registry_tables(url)
        values["metadata.url"] = url
    return Config(values)


@pytest.fixture
def api(registry_config: Config) -> Iterator[TestClient]:
    with TestClient(standalone_app(registry_config), raise_server_exceptions=False) as client:
        client.headers["Content-Type"] = "application/vnd.schemaregistry.v1+json"
        yield client


@pytest.fixture(scope="session")
def registry_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    server = RegistryProcess(tmp_path_factory.mktemp("registry")).start()
    yield server
    server.stop()
