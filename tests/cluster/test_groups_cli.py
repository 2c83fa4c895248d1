"""``tabletopic groups`` against a broker that does not coordinate the group: a real consumer group's
members, committed offsets and lag, and an offset reset, as Kafka's own tools show and do them."""

from __future__ import annotations

import subprocess
import sys
import uuid

from confluent_kafka import Consumer, Producer

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, find_coordinator, wait_until
from tests.support.kafka_clients import close_within, create_topic

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 3
RECORDS = 300
READ = 15


def _groups(admin_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", "groups", "--admin-url", admin_url, *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_any_broker_lists_describes_and_resets_a_group_another_broker_coordinates(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic = f"grouped-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    group = f"readers-{uuid.uuid4().hex[:6]}"
    asked = next(n for n in (1, 2, 3) if n != find_coordinator(cluster, 1, group, key_type=0))
    admin_url = cluster.brokers[asked].admin_url

    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        seen = 0

        def read_some() -> bool:
            nonlocal seen
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
            return seen >= READ

        wait_until(read_some, timeout=60, interval=0)
        consumer.commit(asynchronous=False)

        # With a member, the group shows it and the reset is refused in Kafka's words.
        described = _groups(admin_url, "describe", group)
        assert described.returncode == 0, described.stderr
        assert "Stable" in described.stdout and topic in described.stdout, described.stdout
        refused = _groups(admin_url, "reset-offsets", group, "--topic", topic, "--to", "earliest")
        assert refused.returncode == 1 and refused.stderr.strip(), refused

    finally:
        close_within(consumer)  # whatever failed: no member left in the group past the test
    listed = _groups(admin_url, "list")
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if group in line)
    # Committed where the consumer stopped: part of the topic is still to read.
    assert "Empty" in line and 0 < int(line.split()[-1]) < RECORDS, line

    reset = _groups(admin_url, "reset-offsets", group, "--topic", topic, "--to", "earliest")
    assert reset.returncode == 0, reset.stderr
    assert all(f"{p} -> 0" in reset.stdout for p in range(PARTITIONS)), reset.stdout
    listed = _groups(admin_url, "list")
    line = next(line for line in listed.stdout.splitlines() if group in line)
    assert line.split()[-1] == str(RECORDS), line

    missing = _groups(admin_url, "describe", f"no-such-{group}")
    assert missing.returncode == 1 and "no consumer group" in missing.stderr
