"""Membership: the controller is re-elected when killed, a node that cannot be a cluster broker
refuses to join, and consumer groups resume on another coordinator."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.support.broker_process import BrokerProcess
from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, new_topic, placed, produce_raw, wait_until
from tests.support.kafka_clients import create_topic

pytestmark = CLUSTER_TEST_MARKS


def _kill(cluster: LocalCluster, node: int) -> None:
    broker = cluster.brokers[node]
    assert broker.process is not None
    os.kill(broker.process.pid, signal.SIGKILL)
    broker.process.wait(10)
    broker.process = None


def test_a_killed_controller_is_replaced_and_topics_still_get_leaders(healthy_cluster: LocalCluster) -> None:
    cluster = healthy_cluster
    controller = cluster.metadata(1).controller_id
    _kill(cluster, controller)
    survivor = next(n for n in (1, 2, 3) if n != controller)
    new = wait_until(
        lambda: (c := cluster.metadata(survivor).controller_id) not in (-1, controller) and c, timeout=20
    )
    assert new != controller
    topic = f"after-controller-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.brokers[survivor].bootstrap, topic, 4)
    leaders = placed(cluster, topic, 4)
    assert all(node != controller for node, _ in leaders.values())
    leader = leaders[0][0]
    wait_until(lambda: produce_raw(cluster, leader, topic, 0, b"v") == 0, timeout=10)


def test_a_single_node_refuses_to_join_a_running_cluster_naming_the_key(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    settings = {**cluster.overrides(9), "cluster.enable": "false"}
    node = BrokerProcess(cluster.root / f"refused-{uuid.uuid4().hex[:6]}", settings)
    with pytest.raises(RuntimeError) as failure:
        node.start(timeout=30)
    assert "cluster.enable" in str(failure.value)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"s3stream.wal.mode": "local"}, "s3stream.wal.mode"),
        ({"metadata.url": ""}, "metadata.url"),
    ],
)
def test_a_node_that_cannot_be_a_cluster_broker_refuses_to_start(
    healthy_cluster: LocalCluster, tmp_path: Path, overrides: dict[str, str], key: str
) -> None:
    from tabletopic.config import Config, ConfigError
    from tabletopic.platform import Platform

    settings = {**healthy_cluster.overrides(9), **overrides}
    config = Config.load(overrides=[f"{k}={v}" for k, v in settings.items() if v], data_dir=tmp_path)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        Platform.create(config)


def test_a_group_resumes_from_committed_offsets_when_its_coordinator_dies(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic, _ = new_topic(cluster, "group", 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(60):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0

    def consume(count: int) -> list[bytes]:
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        got: list[bytes] = []
        try:
            while len(got) < count:
                msg = consumer.poll(1.0)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
                    consumer.commit(msg, asynchronous=False)
        finally:
            consumer.close()
        return got

    first = consume(30)
    coordinator = _coordinator(cluster, group)
    _kill(cluster, coordinator)
    wait_until(lambda: _coordinator(cluster, group) != coordinator, timeout=20)
    rest = wait_until(lambda: consume(30), timeout=60)
    assert sorted(first + rest) == sorted(f"v{i}".encode() for i in range(60))


def _coordinator(cluster: LocalCluster, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(10)
    return int(described.coordinator.id)
