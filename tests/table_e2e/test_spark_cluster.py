"""A Spark standalone cluster (master + one worker from pyspark's own jars, on loopback) running
the ingest job of a node configured with ``spark.master=spark://...``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.spark_standalone import SparkStandalone
from tests.support.table_node import SPARK_NODE_SETTINGS, TableNode, assert_exactly_once, table_configs
from tests.support.table_producers import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[SparkStandalone]:
    """A fresh master with one 1-core worker registered."""
    with SparkStandalone(tmp_path / "spark", workers=1) as spark:
        yield spark


def test_node_with_a_standalone_spark_master_ingests_a_topic(
    spark_cluster: SparkStandalone, tmp_path: Path
) -> None:
    settings = {
        **SPARK_NODE_SETTINGS,
        "spark.master": spark_cluster.master_url,
        "spark.executor.memory": "512m",
        "spark.cores.max": "1",
        "table.job.local.max.bytes": "0",  # every job on the cluster, none in the node's helper
    }
    node = TableNode(tmp_path / "cluster-node", settings)
    try:
        node.start(timeout=180)
        topic = "cluster_events"
        node.create_topic(topic, table_configs(convert_value_type="string"), partitions=2)
        log = produce(node, topic, [f"e{i}".encode() for i in range(200)], partitions=2)
        node.wait_committed(topic, log.end_offsets(), timeout=400)
        assert_exactly_once(node.rows(topic), log)
        # The job ran on the cluster: the worker launched an executor for the node's application,
        # whose scratch is under the test's directory (removed with tmp_path).
        assert any((spark_cluster.root / "worker-0").glob("app-*/*/stderr"))
        assert any((spark_cluster.root / "local").glob("spark-*/executor-*"))
    finally:
        node.kill()
