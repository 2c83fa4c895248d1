"""A KIP-848 consumer group (confluent-kafka, ``group.protocol=consumer``) across the death of its
group coordinator: the group's slot moves to another broker, which loads the members, their epochs
and assignments with the committed offsets. So nobody rebalances: no member loses or gives up a
partition, no record is read twice, every record reaches the group and the committed offsets reach
the end."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from functools import partial
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, wait_until
from tests.support.kafka_clients import confluent_produce, create_topic

pytestmark = [*CLUSTER_TEST_MARKS, pytest.mark.timeout(300)]

PARTITIONS = 4


class _Member(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 300,
            }
        )
        self.consumer.subscribe([topic], on_revoke=self._taken, on_lost=self._taken)
        self.seen: Counter[bytes] = Counter()
        self.taken = 0  # partitions revoked or lost
        self.holds = False  # set by this thread: librdkafka's handle is not for two threads at once
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def _taken(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.taken += len(partitions)

    def run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.2)
            self.holds = bool(self.consumer.assignment())
            if message is not None and message.error() is None:
                with self.lock:
                    self.seen[bytes(message.value() or b"")] += 1
        self.consumer.close()


def _produce(bootstrap: str, topic: str, start: int, count: int) -> set[bytes]:
    values = [f"v-{i}".encode() for i in range(start, start + count)]
    messages = [(i % PARTITIONS, b"k", v, ()) for i, v in enumerate(values)]
    confluent_produce(bootstrap, topic, messages, "none", idempotent=True)
    return set(values)


def _committed_at_end(bootstrap: str, topic: str, group: str, total: int) -> bool:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return sum(max(tp.offset, 0) for tp in committed) == total
    finally:
        probe.close()


def test_consumer_protocol_group_survives_its_coordinator_dying(healthy_cluster: LocalCluster) -> None:
    cluster = healthy_cluster
    topic, group = f"kip848-{uuid.uuid4().hex[:6]}", f"g848-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.brokers[1].bootstrap, topic, PARTITIONS)
    sent = _produce(cluster.bootstrap, topic, 0, 200)
    members = [_Member(cluster.bootstrap, topic, group) for _ in range(2)]
    for member in members:
        member.start()
    try:
        wait_until(lambda: _seen(members) >= sent, timeout=90)
        wait_until(partial(_committed_at_end, cluster.bootstrap, topic, group, 200), timeout=60, interval=1)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        wait_until(lambda: all(m.holds for m in members), timeout=60)
        taken_before = [m.taken for m in members]
        cluster.brokers[described.coordinator.id].kill()
        after = _produce(cluster.bootstrap, topic, 200, 200)
        sent |= after
        wait_until(lambda: _seen(members) >= sent, timeout=120, interval=0.5)
        wait_until(partial(_committed_at_end, cluster.bootstrap, topic, group, 400), timeout=60, interval=1)
        assert [m.taken for m in members] == taken_before, "a member gave up partitions"
        counts = []
        for member in members:
            with member.lock:
                counts.append(Counter(member.seen))
        read_twice = sorted(v for c in counts for v, n in c.items() if v in after and n > 1)
        assert not read_twice and not set(counts[0]) & set(counts[1]) & after
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(30)


def _seen(members: list[_Member]) -> set[bytes]:
    seen: set[bytes] = set()
    for member in members:
        with member.lock:
            seen |= set(member.seen)
    return seen
