"""``tabletopic sql`` answers from the node's warm Spark session (``/v1/sql``) instead of starting
Spark itself, and ``--fresh`` reads a table topic's table with the records not yet committed: every
record once before the commit, the same rows after it; an upsert table shows the tail's latest row
of every key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.table_node import TableNode, table_configs

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]


def sql(node: TableNode, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", "sql", *node.cli_options, "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ, TABLETOPIC_LOG_LEVEL="WARNING"),
    )


def rows_of(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def produce(node: TableNode, topic: str, records: list[tuple[str, str | None, int]]) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for key, value, partition in records:
        producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0


def committed_upsert_table(node: TableNode, topic: str) -> None:
    """An upsert table topic (keyed by the record key, commits only when asked) whose table holds
    keys 0-7 with values a0-a7, committed."""
    node.create_topic(
        topic,
        table_configs(
            convert_value_type="string",
            upsert_enable="true",
            id_columns="[_kafka_key]",
            commit_interval_ms="600000",
        ),
        partitions=2,
    )
    produce(node, topic, [(str(i), f"a{i}", i % 2) for i in range(8)])
    node.trigger_commit(topic)
    node.wait_committed(topic, {0: 4, 1: 4})


def test_sql_runs_in_the_nodes_warm_spark_session(node: TableNode, topic_name: str) -> None:
    node.create_topic(topic_name, table_configs(convert_value_type="string"), partitions=2)
    produce(node, topic_name, [(str(i), f"v{i}", i % 2) for i in range(20)])
    node.wait_committed(topic_name, {0: 10, 1: 10})

    done = sql(node, f"SELECT count(*) AS n, max(_kafka_metadata.offset) AS top FROM default.{topic_name}")
    assert rows_of(done) == [{"n": 20, "top": 9}]
    assert "starting Spark in this process" not in done.stderr, done.stderr
    # Unqualified, as a user types it: the table topics' namespace is Spark's current one (it was
    # empty: "Invalid namespace" for SHOW TABLES, TABLE_OR_VIEW_NOT_FOUND for the bare name).
    assert rows_of(sql(node, f"SELECT count(*) AS n FROM {topic_name}")) == [{"n": 20}]
    assert topic_name in [row["tableName"] for row in rows_of(sql(node, "SHOW TABLES"))]
    refused = sql(node, "SELECT * FROM default.no_such_table_here")
    assert refused.returncode == 1 and "no_such_table_here" in refused.stderr, refused.stderr


def test_fresh_read_shows_uncommitted_records_once_and_the_same_rows_after_the_commit(
    node: TableNode, topic_name: str
) -> None:
    node.create_topic(
        topic_name, table_configs(convert_value_type="string", commit_interval_ms="600000"), partitions=2
    )
    produce(node, topic_name, [(str(i), f"a{i}", i % 2) for i in range(6)])
    node.trigger_commit(topic_name)
    node.wait_committed(topic_name, {0: 3, 1: 3})
    node.pause(topic_name)  # the first cycle may have run when triggered: no second one now
    produce(node, topic_name, [(str(i), f"b{i}", i % 2) for i in range(6, 16)])  # not committed

    query = (
        "SELECT _kafka_metadata.partition AS p, _kafka_metadata.offset AS o, _kafka_value AS v "
        f"FROM default.{topic_name} ORDER BY p, o"
    )
    committed_only = rows_of(sql(node, "--engine", "duckdb", query))
    assert len(committed_only) == 6
    fresh = rows_of(sql(node, "--fresh", query))
    assert len(fresh) == 16 and len({(r["p"], r["o"]) for r in fresh}) == 16
    assert sorted(str(r["v"]) for r in fresh) == sorted(
        [f"a{i}" for i in range(6)] + [f"b{i}" for i in range(6, 16)]
    )

    node.resume(topic_name)
    node.wait_committed(topic_name, {0: 8, 1: 8})
    assert rows_of(sql(node, "--engine", "duckdb", query)) == fresh
    assert rows_of(sql(node, "--fresh", query)) == fresh


def test_fresh_read_of_an_upsert_table_applies_the_tails_latest_row_per_key(
    node: TableNode, topic_name: str
) -> None:
    committed_upsert_table(node, topic_name)
    # Not committed: key 1 updated twice, key 2 deleted, key 3 deleted then written again, key 9 new.
    produce(
        node,
        topic_name,
        [("1", "b1", 1), ("1", "c1", 1), ("2", None, 0), ("3", None, 1), ("3", "b3", 1), ("9", "b9", 1)],
    )
    query = f"SELECT _kafka_key AS k, _kafka_value AS v FROM default.{topic_name} ORDER BY k"
    expected = {**{str(i): f"a{i}" for i in range(8)}, "1": "c1", "3": "b3", "9": "b9"}
    del expected["2"]
    fresh = {str(r["k"]): r["v"] for r in rows_of(sql(node, "--fresh", query))}
    assert fresh == expected

    node.trigger_commit(topic_name)
    node.wait_committed(topic_name, {0: 5, 1: 9})
    committed = {str(r["k"]): r["v"] for r in rows_of(sql(node, "--engine", "duckdb", query))}
    assert committed == expected


def test_fresh_read_from_pyspark_is_the_same_table_as_the_embedded_one(
    node: TableNode, topic_name: str, spark: Any, spark_catalog_name: str
) -> None:
    """``tabletopic.spark.fresh.fresh_table`` in a user's own PySpark session: the committed
    snapshot read by Spark plus the tail, for an upsert table (updates, deletes, new keys)."""
    from tabletopic.catalog.adapters import catalog_spec, spark_catalog_conf, spark_catalog_properties
    from tabletopic.spark.fresh import fresh_table
    from tabletopic.spark.session import register_catalogs

    committed_upsert_table(node, topic_name)
    produce(node, topic_name, [("1", "b1", 1), ("2", None, 0), ("9", "b9", 1)])  # not committed
    cfg = node.client_config()
    properties = spark_catalog_properties(catalog_spec(cfg))
    register_catalogs(spark, spark_catalog_conf(spark_catalog_name, properties))

    frame = fresh_table(spark, f"default.{topic_name}", cfg, spark_catalog=spark_catalog_name)
    got = {r["_kafka_key"]: r["_kafka_value"] for r in frame.select("_kafka_key", "_kafka_value").collect()}
    expected = {**{str(i): f"a{i}" for i in range(8)}, "1": "b1", "9": "b9"}
    del expected["2"]
    assert got == expected
    assert frame.columns == spark.table(f"{spark_catalog_name}.default.{topic_name}").columns
