"""``tabletopic tables verify`` against a running node with a real Kafka producer: a healthy table is
proven complete; a table corrupted behind the pipeline's back (one row duplicated, one removed) is
reported by partition and offset, with pyiceberg and with Spark."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.table_node import TableNode, table_configs
from tests.support.table_ops import corrupt, json_report, tables_cli

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(400)]


def verify_cli(node: TableNode, topic: str, *args: str) -> subprocess.CompletedProcess[str]:
    return tables_cli(node, "verify", topic, *args)


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json_report(done)


def test_verify_proves_a_healthy_table_and_names_a_duplicate_and_a_missing_row(
    node: TableNode, topic_name: str, spark: Any, spark_catalog_name: str
) -> None:
    node.create_topic(topic_name, table_configs(convert_value_type="string"), partitions=2)
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for i in range(300):
        producer.produce(topic_name, key=str(i), value=f"v{i}", partition=i % 2)
    assert producer.flush(30) == 0
    node.wait_committed(topic_name, {0: 150, 1: 150})

    healthy = verify_cli(node, topic_name, "--json")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    report = report_of(healthy)
    assert report["ok"] is True
    assert [(p["partition"], p["expected"], p["rows"]) for p in report["partitions"]] == [  # type: ignore[attr-defined]
        (0, 150, 150),
        (1, 150, 150),
    ]
    readable = verify_cli(node, topic_name, "--quiet")
    assert readable.returncode == 0 and "OK" in readable.stdout, readable.stdout + readable.stderr

    corrupt(node, topic_name, duplicate=(1, 42), remove=(0, 17))
    broken = verify_cli(node, topic_name, "--json", "--engine", "pyiceberg")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    parts = {p["partition"]: p for p in report_of(broken)["partitions"]}  # type: ignore[attr-defined]
    assert parts[0]["missing"] == [[17, 18]] and parts[0]["duplicates"] == []
    assert parts[1]["duplicates"] == [[42, 43, 2]] and parts[1]["missing"] == []
    assert parts[0]["unexpected"] == [] and parts[1]["unexpected"] == []
    # The Spark engine's coverage (what --engine spark computes, in the run's one Spark session
    # rather than a CLI process starting its own) is the same as pyiceberg's.
    from tabletopic.catalog.adapters import catalog_spec, spark_catalog_conf, spark_catalog_properties
    from tabletopic.spark.session import register_catalogs
    from tabletopic.spark.verify import spark_coverage
    from tabletopic.table.ops.verify import pyiceberg_coverage

    table = node.load_table(topic_name)
    snapshot = table.metadata.current_snapshot_id
    register_catalogs(
        spark,
        spark_catalog_conf(spark_catalog_name, spark_catalog_properties(catalog_spec(node.client_config()))),
    )
    by_spark = spark_coverage(spark, f"{spark_catalog_name}.default.{topic_name}", snapshot, lambda _: None)
    assert by_spark == pyiceberg_coverage(table, snapshot, lambda _: None)
    assert by_spark[1].duplicates == [(42, 43, 2)]
    human = verify_cli(node, topic_name, "--quiet")
    assert human.returncode == 1
    assert "partition 0: missing offsets 17" in human.stdout, human.stdout
    assert "partition 1: duplicated offsets 42 x2" in human.stdout, human.stdout


def test_verify_names_a_topic_that_is_not_a_table_topic(node: TableNode, topic_name: str) -> None:
    node.create_topic(topic_name, {})
    done = verify_cli(node, topic_name, "--quiet")
    assert done.returncode == 2 and "not a table topic" in done.stderr, done.stderr


def test_verify_proves_an_upsert_table_holds_the_latest_row_of_every_key(
    node: TableNode, topic_name: str
) -> None:
    node.create_topic(
        topic_name,
        table_configs(convert_value_type="string", upsert_enable="true", id_columns="[_kafka_key]"),
        partitions=2,
    )
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    # 40 keys, each written three times; every fifth key then deleted by a tombstone.
    for round_ in range(3):
        for i in range(40):
            producer.produce(topic_name, key=str(i), value=f"v{i}-{round_}", partition=i % 2)
    for i in range(0, 40, 5):
        producer.produce(topic_name, key=str(i), value=None, partition=i % 2)
    assert producer.flush(30) == 0
    node.wait_committed(topic_name, {0: 64, 1: 64})

    healthy = verify_cli(node, topic_name, "--json")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    report = report_of(healthy)
    assert [(p["partition"], p["expected"], p["rows"]) for p in report["partitions"]] == [  # type: ignore[attr-defined]
        (0, 16, 16),
        (1, 16, 16),
    ]
    # Partition 0's key "2" latest change is at offset 41 (round 2, the 21st record of the partition);
    # duplicate it and remove key "4"'s (offset 42).
    corrupt(node, topic_name, duplicate=(0, 41), remove=(0, 42))
    broken = verify_cli(node, topic_name, "--json", "--engine", "pyiceberg")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    parts = {p["partition"]: p for p in report_of(broken)["partitions"]}  # type: ignore[attr-defined]
    assert parts[0]["missing"] == [[42, 43]] and parts[0]["duplicates"] == [[41, 42, 2]]
    assert parts[1]["missing"] == [] and parts[1]["duplicates"] == [] and parts[0]["unexpected"] == []
