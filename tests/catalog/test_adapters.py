"""One configuration -> pyiceberg properties and Spark catalog properties, for every catalog type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tabletopic.catalog.adapters import (
    catalog_spec,
    hadoop_s3a_conf,
    normalize_location,
    pyiceberg_properties,
    spark_catalog_conf,
    spark_catalog_properties,
)
from tabletopic.config import Config, ConfigError

P = "automq.table.topic.catalog."


def spec_for(tmp_path: Path, **values: Any) -> Any:
    return catalog_spec(
        Config({"data.dir": str(tmp_path), **{k.replace("__", "."): v for k, v in values.items()}})
    )


def test_builtin_is_the_default_with_a_file_warehouse_under_the_data_dir(tmp_path: Path) -> None:
    spec = spec_for(tmp_path)
    assert spec.type == "builtin"
    assert spec.warehouse == (tmp_path / "warehouse").resolve().as_uri()
    assert spec.spark_access == "rest"
    props = spark_catalog_properties(spec)
    assert props["type"] == "rest"
    assert props["uri"] == "http://127.0.0.1:8181"
    assert props["cache-enabled"] == "false"
    assert props["default-namespace"] == "default"  # unqualified names find the table topics
    assert "io-impl" not in props


def test_rest_catalog_passes_auth_and_prefix_to_both_clients(tmp_path: Path) -> None:
    spec = catalog_spec(
        Config(
            {
                "data.dir": str(tmp_path),
                P + "type": "rest",
                P + "uri": "https://cat.example/api",
                P + "warehouse": "s3://bucket/wh",
                P + "prefix": "p1",
                P + "credential": "id:secret",
                P + "rest.sigv4-enabled": "true",
                P + "s3.endpoint": "http://127.0.0.1:9000",
                P + "s3.access-key-id": "ak",
                P + "s3.secret-access-key": "sk",
            }
        )
    )
    py = pyiceberg_properties(spec)
    assert py["uri"] == "https://cat.example/api" and py["credential"] == "id:secret"
    assert py["warehouse"] == "s3://bucket/wh" and py["s3.endpoint"] == "http://127.0.0.1:9000"
    spark = spark_catalog_properties(spec)
    assert spark["type"] == "rest" and spark["prefix"] == "p1" and spark["rest.sigv4-enabled"] == "true"
    assert spark["io-impl"] == "org.apache.iceberg.hadoop.HadoopFileIO"
    assert spark["hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert spark["hadoop.fs.s3a.access.key"] == "ak"
    assert spark["hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert not any(key.startswith("s3.") for key in spark)


def test_hive_goes_direct_and_glue_goes_through_the_builtin_rest_catalog(tmp_path: Path) -> None:
    hive = catalog_spec(Config({P + "type": "hive", P + "uri": "thrift://h:9083", P + "warehouse": "/wh"}))
    assert hive.spark_access == "direct"
    assert (
        spark_catalog_properties(hive).items()
        >= {
            "type": "hive",
            "uri": "thrift://h:9083",
            "warehouse": "file:///wh",
        }.items()
    )
    glue = catalog_spec(Config({P + "type": "glue", P + "region": "eu-west-1", P + "catalog-id": "123"}))
    assert glue.spark_access == "rest"
    assert pyiceberg_properties(glue) == {"glue.region": "eu-west-1", "glue.id": "123"}
    assert spark_catalog_properties(glue)["type"] == "rest"


def test_sql_catalog_uses_psycopg3_for_plain_postgres_urls(tmp_path: Path) -> None:
    spec = catalog_spec(
        Config({"data.dir": str(tmp_path), P + "type": "sql", P + "uri": "postgresql://u@h/db"})
    )
    assert pyiceberg_properties(spec)["uri"] == "postgresql+psycopg://u@h/db"
    assert spec.spark_access == "rest"


@pytest.mark.parametrize(
    "values",
    [
        {P + "type": "rest"},
        {P + "type": "hive"},
        {P + "type": "sql"},
        {P + "type": "glue", "catalog.listener": ""},
        {P + "type": "glue", "catalog.spark.access": "direct"},
        {P + "type": "sql", P + "uri": "sqlite:///x.db", "catalog.spark.access": "direct"},
        {P + "type": "nessie"},
    ],
)
def test_impossible_configurations_are_rejected(values: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        catalog_spec(Config(values))


def test_s3_warehouse_borrows_the_node_object_store_settings_when_present(tmp_path: Path) -> None:
    from tabletopic.config import REGISTRY

    if "s3.endpoint" not in REGISTRY:
        pytest.skip("the storage subsystem declares no s3.* keys in this checkout")
    spec = catalog_spec(
        Config(
            {
                "data.dir": str(tmp_path),
                P + "warehouse": "s3://b/wh",
                "s3.endpoint": "http://127.0.0.1:1",
            }
        )
    )
    assert spec.properties["s3.endpoint"] == "http://127.0.0.1:1"


def test_hadoop_conf_keeps_directory_markers_and_honours_virtual_addressing() -> None:
    conf = hadoop_s3a_conf({"s3.endpoint": "https://s3.example", "s3.force-virtual-addressing": "true"})
    assert conf["fs.s3a.directory.marker.retention"] == "keep"
    assert conf["fs.s3a.connection.ssl.enabled"] == "true"
    assert conf["fs.s3a.path.style.access"] == "false"


def test_locations_are_normalised_to_triple_slash_file_uris() -> None:
    assert normalize_location("file:/tmp/x") == "file:///tmp/x"
    assert normalize_location("file:///tmp/x") == "file:///tmp/x"
    assert normalize_location("/tmp/x") == "file:///tmp/x"
    assert normalize_location("s3://b/x") == "s3://b/x"


def test_spark_catalog_conf_prefixes_every_property() -> None:
    conf = spark_catalog_conf("c", {"type": "rest", "uri": "http://x"})
    assert conf == {
        "spark.sql.catalog.c": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.c.type": "rest",
        "spark.sql.catalog.c.uri": "http://x",
    }


def test_spark_session_conf_is_loopback_with_iceberg_and_user_passthrough(tmp_path: Path) -> None:
    from tabletopic.spark.session import spark_conf

    conf = spark_conf(
        Config({"data.dir": str(tmp_path), "spark.executor.cores": "3", "spark.s3a.jars": "never"}),
        spark_catalog_conf("c", {"type": "rest", "uri": "http://x"}),
        "c",
    )
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.executor.cores"] == "3"
    assert "spark.s3a.jars" not in conf
    assert conf["spark.jars"].endswith("iceberg-spark-runtime-3.5_2.12-1.10.2.jar")
    assert conf["spark.sql.defaultCatalog"] == "c"
    assert "IcebergSparkSessionExtensions" in conf["spark.sql.extensions"]


def test_every_catalog_kind_has_a_backend_and_auto_access_follows_it() -> None:
    from tabletopic.catalog.backends import CATALOG_BACKENDS, CatalogKind, SparkAccess

    assert set(CATALOG_BACKENDS) == set(CatalogKind)
    direct = {kind for kind, entry in CATALOG_BACKENDS.items() if entry.default_access is SparkAccess.DIRECT}
    assert direct == {CatalogKind.REST, CatalogKind.HIVE}


def test_a_missing_catalog_implementation_names_what_to_install() -> None:
    from dataclasses import replace

    from tabletopic.catalog.backends import CATALOG_BACKENDS, CatalogKind, CatalogUnavailable

    hive = replace(CATALOG_BACKENDS[CatalogKind.HIVE], module="tabletopic_no_such_module")
    with pytest.raises(CatalogUnavailable, match=r"install pyiceberg\[hive\]"):
        hive.open("c", {"uri": "thrift://h:9083"}, None)
