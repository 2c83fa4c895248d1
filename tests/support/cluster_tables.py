"""Table topics on a test cluster: created with a short commit interval, their tables loaded
through a node's REST catalog and their committed offsets read, a partition moved by asking the
controller."""

from __future__ import annotations

from typing import Any

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata
from tabletopic.table.table_config import sanitize_table_name
from tests.support.cluster import LocalCluster, wait_until
from tests.support.table_node import table_configs

PARTITIONS = 3
COMMIT_INTERVAL_S = 1.0


def create_table_topic(cluster: LocalCluster, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    configs = table_configs(commit_interval_ms=str(int(COMMIT_INTERVAL_S * 1000)))
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)
    admin.create_topics([new])[topic].result(30)


def load_table(cluster: LocalCluster, node: int, topic: str) -> Any:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog(f"node-{node}", type="rest", uri=cluster.catalog_url(node))
    return catalog.load_table(f"default.{sanitize_table_name(topic)}")


def move_partition(cluster: LocalCluster, topic: str, partition: int, node: int) -> None:
    engine = database.create_engine(cluster.metadata_url)
    try:
        unknown = ClusterMetadata(engine).request_moves([(topic, partition, node)])
    finally:
        engine.dispose()
    assert not unknown, f"{unknown} not placed by the controller yet"
    wait_until(lambda: cluster.leaders(topic)[partition][0] == node, timeout=20)


def committed(table: Any) -> dict[int, int]:
    from tabletopic.table.commit import committed_state

    return dict(committed_state(table.refresh()).offsets)
