"""The built-in REST catalog fronting other catalogs (sql, Glue on moto, Hive Metastore): REST clients
create, append and read, and each backend's compare-and-swap surfaces as a 409 CommitFailedException."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException

from tests.support.catalog_fixtures import CatalogFactory

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

P = "automq.table.topic.catalog."
SCHEMA = pa.schema([("id", pa.int64())])


def backend_values(kind: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    tmp = request.getfixturevalue("tmp_path")
    if kind == "sql":
        return {P + "type": "sql", P + "uri": f"sqlite:///{tmp / 'catalog.db'}"}
    if kind == "glue":
        moto = request.getfixturevalue("moto_server")
        return {
            P + "type": "glue",
            P + "glue.endpoint": moto.endpoint,
            P + "glue.region": "us-east-1",
            P + "glue.access-key-id": "testing",
            P + "glue.secret-access-key": "testing",
            P + "warehouse": (tmp / "wh").as_uri(),
        }
    metastore = request.getfixturevalue("hive_metastore")
    return {
        P + "type": "hive",
        P + "uri": metastore.uri,
        P + "warehouse": (tmp / "wh").as_uri(),
        "catalog.spark.access": "rest",
    }


@pytest.mark.parametrize("kind", ["sql", "glue", "hive"])
def test_rest_clients_share_a_fronted_catalog_and_conflicts_answer_409(
    kind: str, request: pytest.FixtureRequest, make_catalog: CatalogFactory
) -> None:
    handle = make_catalog(backend_values(kind, request))
    assert handle.rest is not None
    first, second = handle.rest_client(), handle.rest_client()
    first.create_namespace("fronted")
    first.create_table("fronted.t", SCHEMA, properties={"commit.retry.num-retries": "0"})
    a, b = first.load_table("fronted.t"), second.load_table("fronted.t")
    a.append(pa.table({"id": pa.array([1], pa.int64())}))
    with pytest.raises(CommitFailedException):
        b.append(pa.table({"id": pa.array([2], pa.int64())}))
    b.refresh()
    b.append(pa.table({"id": pa.array([2], pa.int64())}))
    direct = handle.backing.load_table("fronted.t")
    assert sorted(direct.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    assert [ns for ns in second.list_namespaces() if ns == ("fronted",)]
    second.drop_table("fronted.t")
    assert not handle.backing.table_exists("fronted.t")
