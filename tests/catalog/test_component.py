"""The catalog component inside a node: opens the catalog, serves the built-in REST catalog and
offers what the table pipeline and Spark need."""

from __future__ import annotations

from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from tabletopic import database
from tabletopic.catalog.component import CatalogComponent
from tabletopic.config import Config
from tabletopic.http_auth import PlainHttp

pytestmark = pytest.mark.timeout(60)


def _component(config: Config) -> CatalogComponent:
    engine = database.create_engine(database.default_url(config.data_dir))
    return CatalogComponent(config, engine, http_security=PlainHttp())


async def test_node_serves_the_builtin_catalog_and_offers_it_to_spark(tmp_path: Path) -> None:
    component = _component(Config({"data.dir": str(tmp_path), "catalog.listener": "http://127.0.0.1:0"}))
    await component.start()
    try:
        uri = component.rest_uri
        assert uri is not None and uri.startswith("http://127.0.0.1:") and not uri.endswith(":0")
        conf = component.spark_conf
        assert conf["spark.sql.catalog.tabletopic.type"] == "rest"
        assert conf["spark.sql.catalog.tabletopic.uri"] == uri
        catalog = component.catalog
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", pa.schema([("a", pa.int64())]))
        table.append(pa.table({"a": [1, 2, 3]}))
        async with httpx.AsyncClient(base_url=uri) as client:
            loaded = (await client.get("/v1/namespaces/db/tables/t")).json()
        assert loaded["metadata"]["current-snapshot-id"] == table.current_snapshot().snapshot_id
        assert loaded["metadata"]["location"].startswith((tmp_path / "warehouse").resolve().as_uri())
    finally:
        await component.stop()


async def test_node_start_fails_loudly_when_the_external_rest_catalog_is_unreachable(tmp_path: Path) -> None:
    values = {
        "data.dir": str(tmp_path),
        "automq.table.topic.catalog.type": "rest",
        "automq.table.topic.catalog.uri": "http://127.0.0.1:9/never-contacted",
    }
    component = _component(Config(values))
    # pyiceberg's RestCatalog fetches /v1/config when opened; an unreachable catalog fails start-up.
    with pytest.raises(Exception):  # noqa: B017 - any connection error is acceptable here
        await component.start()
    await component.stop()


def test_advertised_uri_uses_the_bound_port_and_a_connectable_host() -> None:
    from tabletopic.catalog.component import advertised_uri

    assert advertised_uri("http://127.0.0.1:0", 41234) == "http://127.0.0.1:41234"
    assert advertised_uri("http://0.0.0.0:8181", 8181) == "http://127.0.0.1:8181"
    assert advertised_uri("http://node-1:8181", 8181) == "http://node-1:8181"
