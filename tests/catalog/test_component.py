"""The catalog component inside a node: opens the catalog, serves the built-in REST catalog and
registers what the table pipeline needs in ``platform.services``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from tabletopic.config import Config
from tabletopic.platform import Platform

pytestmark = pytest.mark.timeout(60)

COMPONENT = "tabletopic.catalog.component:CatalogComponent"


async def test_node_serves_the_builtin_catalog_and_registers_services(tmp_path: Path) -> None:
    platform = Platform.create(Config({"data.dir": str(tmp_path), "catalog.listener": "http://127.0.0.1:0"}))
    await platform.start((COMPONENT,))
    try:
        uri = platform.services["catalog_rest_uri"]
        assert uri.startswith("http://127.0.0.1:") and not uri.endswith(":0")
        conf = platform.services["spark_catalog_conf"]
        assert conf["spark.sql.catalog.tabletopic.type"] == "rest"
        assert conf["spark.sql.catalog.tabletopic.uri"] == uri
        catalog = platform.services["catalog"]
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", pa.schema([("a", pa.int64())]))
        table.append(pa.table({"a": [1, 2, 3]}))
        async with httpx.AsyncClient(base_url=uri) as client:
            loaded = (await client.get("/v1/namespaces/db/tables/t")).json()
        assert loaded["metadata"]["current-snapshot-id"] == table.current_snapshot().snapshot_id
        assert loaded["metadata"]["location"].startswith((tmp_path / "warehouse").resolve().as_uri())
    finally:
        await platform.stop()


async def test_node_start_fails_loudly_when_the_external_rest_catalog_is_unreachable(tmp_path: Path) -> None:
    values = {
        "data.dir": str(tmp_path),
        "automq.table.topic.catalog.type": "rest",
        "automq.table.topic.catalog.uri": "http://127.0.0.1:9/never-contacted",
    }
    platform = Platform.create(Config(values))
    # pyiceberg's RestCatalog fetches /v1/config when opened; an unreachable catalog fails start-up.
    with pytest.raises(Exception):  # noqa: B017 - any connection error is acceptable here
        await platform.start((COMPONENT,))
    await platform.stop()


def test_advertised_uri_uses_the_bound_port_and_a_connectable_host() -> None:
    from tabletopic.catalog.component import advertised_uri

    assert advertised_uri("http://127.0.0.1:0", 41234) == "http://127.0.0.1:41234"
    assert advertised_uri("http://0.0.0.0:8181", 8181) == "http://127.0.0.1:8181"
    assert advertised_uri("http://node-1:8181", 8181) == "http://node-1:8181"
