"""Both scale-out paths together: a table topic spread over the brokers of the cluster, ingested by
a Spark standalone cluster (a master and two workers on loopback). A fourth broker whose Spark runs
on ``spark://…`` joins and is given the table's partition 0, so it coordinates the table; the jobs'
tasks run in executors on the two workers and read the partitions of every broker straight from
object storage."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.cluster import LocalCluster, placed, wait_until
from tests.support.cluster_tables import committed, create_table_topic, load_table, move_partition
from tests.support.spark_standalone import SparkStandalone
from tests.support.table_node import DeliveryLog, assert_exactly_once

pytestmark = [
    pytest.mark.integration,
    pytest.mark.postgres,
    pytest.mark.s3,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

SPARK_NODE = 5


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[SparkStandalone]:
    with SparkStandalone(tmp_path / "spark") as spark:
        yield spark


def test_table_pipeline_runs_on_a_spark_standalone_cluster_against_the_brokers(
    healthy_cluster: LocalCluster, spark_cluster: SparkStandalone
) -> None:
    cluster = healthy_cluster
    spark_settings = {
        "table.job.runner": "spark",
        "spark.master": spark_cluster.master_url,
        "spark.driver.memory": "768m",
        "spark.executor.memory": "512m",
        "spark.cores.max": "2",
        "table.job.local.max.bytes": "0",  # every job on the cluster, none in the node's helper
    }
    cluster.start(SPARK_NODE, **spark_settings)
    try:
        wait_until(lambda: len(cluster.metadata(1).brokers) == 4, timeout=30)
        topic = f"spark-{uuid.uuid4().hex[:8]}"
        create_table_topic(cluster, topic, partitions=4)
        leaders = placed(cluster, topic, 4)
        move_partition(cluster, topic, 0, SPARK_NODE)
        assert len({node for node, _ in leaders.values()}) >= 2  # the data lives on several brokers
        log = DeliveryLog()
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
        )
        for i in range(400):
            producer.produce(topic, value=f"v{i}".encode(), partition=i % 4, on_delivery=log.callback(i))
        assert producer.flush(60) == 0
        assert not log.errors
        try:
            table = wait_until(lambda: load_table(cluster, 1, topic), timeout=240, interval=0.5)
        except TimeoutError as exc:
            logs = cluster.brokers[SPARK_NODE].log_tail(6000), spark_cluster.log_tail("master")
            raise AssertionError(
                f"no table: {exc}\n--- broker ---\n{logs[0]}\n--- master ---\n{logs[1]}"
            ) from None
        ends = log.end_offsets()
        wait_until(
            lambda: all(committed(table).get(p, 0) >= end for p, end in ends.items()),
            timeout=180,
            interval=0.5,
        )
        assert_exactly_once(table.refresh().scan().to_arrow().to_pylist(), log)
        # The tasks ran in executors on the standalone workers, not inside the broker.
        assert "Asked to launch executor" in "".join(
            spark_cluster.log_tail(f"worker-{i}", 100_000) for i in range(2)
        )
    finally:
        broker = cluster.brokers.pop(SPARK_NODE)
        broker.stop()
