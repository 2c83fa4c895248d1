"""Table topics in a cluster: one coordinator per table topic, on the leader of partition 0,
reading every partition from object storage whoever leads it; when that broker is killed the
coordinator moves with the partition and the table keeps every record exactly once."""

from __future__ import annotations

import os
import signal
import uuid
from collections import Counter
from typing import Any

import httpx
from confluent_kafka import Producer

from tabletopic.api.cluster_tables import FORWARDED
from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, placed, wait_until
from tests.support.kafka_clients import create_topic
from tests.support.table_node import table_configs

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 4


def _rows(cluster: LocalCluster, topic: str) -> list[dict[str, Any]]:
    from pyiceberg.catalog import load_catalog

    from tabletopic.table.table_config import sanitize_table_name

    node = next(iter(cluster.running()))
    catalog = load_catalog(f"c{node}", type="rest", uri=cluster.catalog_url(node))
    table = catalog.load_table(f"default.{sanitize_table_name(topic)}")
    return list(table.scan().to_arrow().to_pylist())


def _coordinators(cluster: LocalCluster, topic: str) -> list[int]:
    """Brokers running a pipeline for ``topic`` (not stopped): each asked for its own alone (as a
    peer asks it), since any broker lists every table topic of the cluster."""
    found = []
    for node, broker in cluster.running().items():
        answer = httpx.get(f"{broker.admin_url}/v1/tables", headers={FORWARDED: "1"}, timeout=10).json()
        if any(t.get("topic") == topic and t.get("state") != "STOPPED" for t in answer):
            found.append(node)
    return found


def _produce(cluster: LocalCluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def test_one_coordinator_per_table_moves_with_partition_zero(healthy_cluster: LocalCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = healthy_cluster
    topic = f"tbl_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1, config=table_configs())
    admin.create_topics([new])[topic].result(30)
    leaders = placed(cluster, topic, PARTITIONS)
    first = [f"a-{i}".encode() for i in range(200)]
    _produce(cluster, topic, first)
    wait_until(lambda: len(_rows(cluster, topic)) >= 200, timeout=60, interval=0.5)
    assert _coordinators(cluster, topic) == [leaders[0][0]]
    victim = leaders[0][0]
    process = cluster.brokers[victim].process
    assert process is not None
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    cluster.brokers[victim].process = None
    second = [f"b-{i}".encode() for i in range(200)]
    _produce(cluster, topic, second)
    rows = wait_until(lambda: (r := _rows(cluster, topic)) and len(r) >= 400 and r, timeout=90, interval=0.5)
    keys = Counter((r["_kafka_metadata"]["partition"], r["_kafka_metadata"]["offset"]) for r in rows)
    assert max(keys.values()) == 1
    assert sorted(r["_kafka_value"] for r in rows) == sorted(first + second)
    coordinators = _coordinators(cluster, topic)
    assert len(coordinators) == 1 and coordinators[0] != victim


def test_the_table_gets_records_a_leader_on_the_shared_wal_has_not_uploaded_yet(
    healthy_cluster: LocalCluster,
) -> None:
    """Partition 1 led by a broker that uploads only every 10 minutes, the coordinator on another:
    the coordinator asks the leader to upload before each cycle, so the table shows the records
    within seconds (it used to wait for the leader's next upload)."""
    from tests.support.cluster import move_with_cli

    cluster = healthy_cluster
    topic = f"tbl_fresh_{uuid.uuid4().hex[:8]}"
    create_topic(cluster.brokers[1].bootstrap, topic, 2, table_configs())
    leaders = placed(cluster, topic, 2)
    cluster.start(4, **{"s3stream.upload.interval.ms": "600000"})
    try:
        if leaders[0][0] != 1:
            move_with_cli(cluster, topic, 0, 1, via=1)
        move_with_cli(cluster, topic, 1, 4, via=1)
        wait_until(lambda: [cluster.leaders(topic)[p][0] for p in (0, 1)] == [1, 4], timeout=30)
        values = [f"fresh-{i}".encode() for i in range(50)]
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
        for value in values:
            producer.produce(topic, value=value, partition=1)
        assert producer.flush(30) == 0
        rows = wait_until(lambda: len(r := _rows(cluster, topic)) >= 50 and r, timeout=30, interval=0.5)
        assert sorted(r["_kafka_value"] for r in rows) == sorted(values)
    finally:
        cluster.brokers[4].stop()
        del cluster.brokers[4]
