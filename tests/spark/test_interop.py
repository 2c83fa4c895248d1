"""Spark and pyiceberg create, append, alter and read each other's tables through every catalog kind:
the built-in REST catalog (SQLite, PostgreSQL, S3 warehouse), a real Hive Metastore, Glue on moto
(pyiceberg direct, Spark through the built-in REST catalog fronting Glue) and SeaweedFS's own Iceberg
REST catalog as an external REST catalog.

All cases share the one Spark session; each registers its catalog under a fresh name.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from tests.support.catalog_fixtures import CatalogFactory, CatalogHandle

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

P = "automq.table.topic.catalog."


@dataclass
class Interop:
    """A catalog as both engines see it."""

    handle: CatalogHandle
    pyiceberg: Catalog
    spark_name: str
    namespace: str

    @property
    def spark_table(self) -> str:
        return f"{self.spark_name}.{self.namespace}"


def s3_catalog_properties(s3_settings: dict[str, str]) -> dict[str, str]:
    return {
        P + "s3.endpoint": s3_settings["s3.endpoint"],
        P + "s3.access-key-id": s3_settings["s3.access.key"],
        P + "s3.secret-access-key": s3_settings["s3.secret.key"],
        P + "s3.region": s3_settings["s3.region"],
    }


def builtin_sqlite(request: pytest.FixtureRequest, make: CatalogFactory) -> tuple[CatalogHandle, Catalog]:
    handle = make()
    return handle, handle.rest_client()


def builtin_postgres(request: pytest.FixtureRequest, make: CatalogFactory) -> tuple[CatalogHandle, Catalog]:
    handle = make({"metadata.url": request.getfixturevalue("postgres_url")})
    return handle, handle.rest_client()


def builtin_s3(request: pytest.FixtureRequest, make: CatalogFactory) -> tuple[CatalogHandle, Catalog]:
    s3 = request.getfixturevalue("s3_settings")
    warehouse = f"s3://{s3['s3.bucket']}/{s3['s3.prefix']}warehouse"
    handle = make({P + "warehouse": warehouse, **s3_catalog_properties(s3)})
    # The REST client gets the s3.* FileIO settings from the catalog's LoadTable config.
    return handle, handle.rest_client()


def sql_catalog(request: pytest.FixtureRequest, make: CatalogFactory) -> tuple[CatalogHandle, Catalog]:
    # pyiceberg uses the SQL catalog directly; Spark reaches it through the built-in REST catalog.
    database = request.getfixturevalue("tmp_path") / "user-catalog.db"
    handle = make({P + "type": "sql", P + "uri": f"sqlite:///{database}"})
    return handle, handle.backing


def hive(request: pytest.FixtureRequest, make: CatalogFactory) -> tuple[CatalogHandle, Catalog]:
    metastore = request.getfixturevalue("hive_metastore")
    warehouse = request.getfixturevalue("tmp_path") / "hive-warehouse"
    handle = make({P + "type": "hive", P + "uri": metastore.uri, P + "warehouse": warehouse.as_uri()})
    return handle, handle.backing


def glue(request: pytest.FixtureRequest, make: CatalogFactory) -> tuple[CatalogHandle, Catalog]:
    moto = request.getfixturevalue("moto_server")
    warehouse = request.getfixturevalue("tmp_path") / "glue-warehouse"
    handle = make(
        {
            P + "type": "glue",
            P + "endpoint": moto.endpoint,
            P + "region": "us-east-1",
            P + "access-key-id": "testing",
            P + "secret-access-key": "testing",
            P + "warehouse": warehouse.as_uri(),
        }
    )
    return handle, handle.backing


def seaweedfs_rest(request: pytest.FixtureRequest, make: CatalogFactory) -> tuple[CatalogHandle, Catalog]:
    import boto3

    seaweed = request.getfixturevalue("seaweedfs")
    s3 = request.getfixturevalue("s3_settings")
    bucket = f"tb{uuid.uuid4().hex[:10]}"
    boto3.client(
        "s3tables",
        endpoint_url=seaweed.endpoint,
        aws_access_key_id=s3["s3.access.key"],
        aws_secret_access_key=s3["s3.secret.key"],
        region_name="us-east-1",
    ).create_table_bucket(name=bucket)
    handle = make(
        {
            P + "type": "rest",
            P + "uri": seaweed.iceberg_uri,
            P + "warehouse": f"s3://{bucket}",
            P + "credential": f"{s3['s3.access.key']}:{s3['s3.secret.key']}",
            P + "oauth2-server-uri": f"{seaweed.iceberg_uri}/v1/oauth/tokens",
            **s3_catalog_properties(s3),
        }
    )
    return handle, handle.backing


CASES: dict[str, Callable[[pytest.FixtureRequest, CatalogFactory], tuple[CatalogHandle, Catalog]]] = {
    "builtin-sqlite": builtin_sqlite,
    "builtin-postgres": builtin_postgres,
    "builtin-s3": builtin_s3,
    "sql-sqlite": sql_catalog,
    "hive": hive,
    "glue": glue,
    "seaweedfs-rest": seaweedfs_rest,
}
MARKS: dict[str, list[Any]] = {
    "builtin-postgres": [pytest.mark.postgres],
    "builtin-s3": [pytest.mark.s3],
    "seaweedfs-rest": [pytest.mark.s3],
}


@pytest.fixture(params=[pytest.param(name, marks=MARKS.get(name, [])) for name in CASES])
def interop(request: pytest.FixtureRequest, spark: SparkSession, make_catalog: CatalogFactory) -> Interop:
    from tabletopic.catalog.adapters import spark_catalog_conf
    from tabletopic.spark.session import register_catalogs

    handle, client = CASES[request.param](request, make_catalog)
    name = f"{request.param.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
    register_catalogs(spark, spark_catalog_conf(name, handle.spark_properties()))
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    return Interop(handle, client, name, namespace)


def test_spark_and_pyiceberg_read_and_extend_each_others_tables(
    spark: SparkSession, interop: Interop
) -> None:
    from pyiceberg.types import StringType

    ns = interop.spark_table
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(
        f"CREATE TABLE {ns}.events (id bigint, name string, day date) USING iceberg PARTITIONED BY (day)"
    )
    spark.sql(f"INSERT INTO {ns}.events VALUES (1, 'a', DATE'2024-01-01'), (2, 'b', DATE'2024-01-02')")

    # pyiceberg reads what Spark wrote, then appends and evolves the schema.
    table = interop.pyiceberg.load_table(f"{interop.namespace}.events")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    with table.update_schema() as update:
        update.add_column("origin", StringType())
    table = interop.pyiceberg.load_table(f"{interop.namespace}.events")
    import datetime as dt

    table.append(
        pa.table(
            {
                "id": pa.array([3], pa.int64()),
                "name": ["c"],
                "day": pa.array([dt.date(2024, 1, 3)], pa.date32()),
                "origin": ["pyiceberg"],
            }
        )
    )

    # Spark sees pyiceberg's rows and column, alters the table itself and writes with a summary property.
    rows = spark.sql(f"SELECT id, origin FROM {ns}.events ORDER BY id").collect()
    assert [(r.id, r.origin) for r in rows] == [(1, None), (2, None), (3, "pyiceberg")]
    spark.sql(f"ALTER TABLE {ns}.events ADD COLUMN score double")
    frame = spark.createDataFrame(
        [(4, "d", dt.date(2024, 1, 4), "spark", 0.5)],
        "id bigint, name string, day date, origin string, score double",
    )
    frame.writeTo(f"{ns}.events").option("snapshot-property.kafka.offsets", "p0:41").append()
    assert spark.sql(f"SELECT count(*) AS n FROM {ns}.events.snapshots").collect()[0].n == 3

    # pyiceberg sees Spark's column, rows and the snapshot summary property.
    table = interop.pyiceberg.load_table(f"{interop.namespace}.events")
    assert "score" in table.schema().column_names
    data = table.scan().to_arrow().sort_by("id")
    assert data.column("id").to_pylist() == [1, 2, 3, 4]
    assert data.column("score").to_pylist() == [None, None, None, 0.5]
    current = table.current_snapshot()
    assert current is not None and current.summary is not None
    assert current.summary["kafka.offsets"] == "p0:41"

    # A table pyiceberg creates is readable from Spark, and Spark can drop it.
    created = interop.pyiceberg.create_table(
        f"{interop.namespace}.from_python", pa.schema([("k", pa.string()), ("v", pa.int64())])
    )
    created.append(pa.table({"k": ["x", "y"], "v": pa.array([10, 20], pa.int64())}))
    assert spark.sql(f"SELECT sum(v) AS s FROM {ns}.from_python").collect()[0].s == 30
    spark.sql(f"DROP TABLE {ns}.from_python")
    assert not interop.pyiceberg.table_exists(f"{interop.namespace}.from_python")


def test_spark_create_table_as_select_is_visible_to_pyiceberg(spark: SparkSession, interop: Interop) -> None:
    ns = interop.spark_table
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(f"CREATE TABLE {ns}.ctas USING iceberg AS SELECT id, id * 2 AS twice FROM range(5)")
    table = interop.pyiceberg.load_table(f"{interop.namespace}.ctas")
    assert sorted(table.scan().to_arrow().column("twice").to_pylist()) == [0, 2, 4, 6, 8]


def test_spark_reads_every_row_of_a_table_whose_appends_merged_their_manifests(
    spark: SparkSession, make_catalog: CatalogFactory
) -> None:
    """The pipeline's appends merge manifests once enough small ones pile up (pyiceberg writes the
    merged manifest, its entries now EXISTING): Spark reads every row through them, once."""
    import uuid as uuid_module

    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    from tabletopic.catalog.adapters import spark_catalog_conf
    from tabletopic.spark.session import register_catalogs
    from tabletopic.table.commit import commit_data_files, committed_state

    handle = make_catalog()
    client = handle.rest_client()
    name = f"merged_{uuid_module.uuid4().hex[:6]}"
    register_catalogs(spark, spark_catalog_conf(name, handle.spark_properties()))
    namespace = f"ns_{uuid_module.uuid4().hex[:8]}"
    client.create_namespace(namespace)
    table = client.create_table(
        f"{namespace}.merged",
        pa.schema([("v", pa.int64())]),
        properties={"commit.manifest.min-count-to-merge": "3"},
    )
    for value in range(1, 8):
        rows = pa.table({"v": pa.array([value], pa.int64())})
        files = _dataframe_to_data_files(table.metadata, df=rows, io=table.io, write_uuid=uuid_module.uuid4())
        commit_data_files(table, list(files), {0: value}, committed_state(table), 1, None)
        table.refresh()
    manifests = spark.sql(f"SELECT count(*) AS n FROM {name}.{namespace}.merged.manifests").collect()[0].n
    assert manifests < 7
    values = [r.v for r in spark.sql(f"SELECT v FROM {name}.{namespace}.merged ORDER BY v").collect()]
    assert values == [1, 2, 3, 4, 5, 6, 7]
    # Each file keeps the sequence number of the commit that added it (deletes are matched by it).
    entries = spark.sql(f"SELECT sequence_number FROM {name}.{namespace}.merged.entries").collect()
    assert sorted(r.sequence_number for r in entries) == [1, 2, 3, 4, 5, 6, 7]
