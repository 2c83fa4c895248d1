"""A KIP-848 consumer group (confluent-kafka, ``group.protocol=consumer``) across the death of its
group coordinator: the group's slot moves to another broker, which loads the members, their epochs
and assignments with the committed offsets. So nobody rebalances: no member loses or gives up a
partition, no record is read twice, every record reaches the group and the committed offsets reach
the end."""

from __future__ import annotations

import uuid
from functools import partial

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, wait_until
from tests.support.group_member import GroupMember, committed_offsets, read_by
from tests.support.kafka_clients import confluent_produce, create_topic

pytestmark = [*CLUSTER_TEST_MARKS, pytest.mark.timeout(300)]

PARTITIONS = 4
MEMBER_SETTINGS = {"group.protocol": "consumer", "auto.commit.interval.ms": 300}


def _produce(bootstrap: str, topic: str, start: int, count: int) -> set[bytes]:
    values = [f"v-{i}".encode() for i in range(start, start + count)]
    messages = [(i % PARTITIONS, b"k", v, ()) for i, v in enumerate(values)]
    confluent_produce(bootstrap, topic, messages, "none", idempotent=True)
    return set(values)


def _committed_at_end(bootstrap: str, topic: str, group: str, total: int) -> bool:
    committed = committed_offsets(bootstrap, group, topic, range(PARTITIONS))
    return sum(max(offset, 0) for offset in committed.values()) == total


def test_consumer_protocol_group_survives_its_coordinator_dying(healthy_cluster: LocalCluster) -> None:
    cluster = healthy_cluster
    topic, group = f"kip848-{uuid.uuid4().hex[:6]}", f"g848-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.brokers[1].bootstrap, topic, PARTITIONS)
    sent = _produce(cluster.bootstrap, topic, 0, 200)
    members = [GroupMember(cluster.bootstrap, topic, group, MEMBER_SETTINGS) for _ in range(2)]
    for member in members:
        member.start()
    try:
        wait_until(lambda: set(read_by(members)) >= sent, timeout=90)
        wait_until(partial(_committed_at_end, cluster.bootstrap, topic, group, 200), timeout=60, interval=1)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        wait_until(lambda: all(m.holds for m in members), timeout=60)
        taken_before = [m.taken for m in members]
        cluster.brokers[described.coordinator.id].kill()
        after = _produce(cluster.bootstrap, topic, 200, 200)
        sent |= after
        wait_until(lambda: set(read_by(members)) >= sent, timeout=120, interval=0.5)
        wait_until(partial(_committed_at_end, cluster.bootstrap, topic, group, 400), timeout=60, interval=1)
        assert [m.taken for m in members] == taken_before, "a member gave up partitions"
        counts = [member.seen() for member in members]
        read_twice = sorted(v for c in counts for v, n in c.items() if v in after and n > 1)
        assert not read_twice and not set(counts[0]) & set(counts[1]) & after
    finally:
        for member in members:
            member.stop()
