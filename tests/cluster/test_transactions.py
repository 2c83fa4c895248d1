"""Transactions in a cluster: the coordinator of a transactional id is the leader of its slot
(FindCoordinator key type 1), markers reach partitions other brokers lead, and when the
coordinator's broker is killed mid-transaction the slot's new leader takes the transaction over:
it ends committed or aborted, never half visible, and the producer's id can be initialised again."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, find_coordinator, new_topic, wait_until
from tests.support.kafka_clients import read_values, transactional_producer

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 3


def _producer(cluster: LocalCluster, transactional_id: str) -> Producer:
    return Producer(transactional_producer(cluster.bootstrap, transactional_id))


def _agreed_coordinator(cluster: LocalCluster, transactional_id: str) -> int | None:
    """The transaction coordinator of ``transactional_id`` once every broker names the same one."""
    named = {find_coordinator(cluster, n, transactional_id) for n in (1, 2, 3)}
    return named.pop() if len(named) == 1 else None


def _group_coordinated_elsewhere(cluster: LocalCluster, transactional_id: str) -> str | None:
    """A group id whose coordinator is not the transaction coordinator of ``transactional_id``."""
    coordinator = _agreed_coordinator(cluster, transactional_id)
    if coordinator is None:
        return None
    candidates = (f"g{i}-{transactional_id}" for i in range(64))
    return next((g for g in candidates if find_coordinator(cluster, 1, g, 0) != coordinator), None)


def _read(cluster: LocalCluster, topic: str, isolation: str) -> list[bytes]:
    return sorted(read_values(cluster.bootstrap, topic, PARTITIONS, 0, {"isolation.level": isolation}))


def test_transactions_commit_and_abort_across_partitions_led_by_different_brokers(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "txn", PARTITIONS)
    transactional_id = f"tx-{uuid.uuid4().hex[:8]}"
    coordinator = wait_until(lambda: _agreed_coordinator(cluster, transactional_id))
    assert any(node != coordinator for node, _ in leaders.values())  # markers go to other brokers
    producer = _producer(cluster, transactional_id)
    producer.init_transactions(30)
    for tag, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        for p in range(PARTITIONS):
            producer.produce(topic, f"{tag}-{p}".encode(), partition=p)
        assert producer.flush(30) == 0  # written to each leader (an abort purges unsent ones)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    expected = sorted(f"{t}-{p}".encode() for t in "ac" for p in range(PARTITIONS))
    assert _read(cluster, topic, "read_committed") == expected
    everything = _read(cluster, topic, "read_uncommitted")
    assert everything == sorted([*expected, *(f"b-{p}".encode() for p in range(PARTITIONS))])

    # Consume-transform-produce: the group's offsets go to its coordinator, another broker (the
    # controller evens the coordinator slots of each kind out over the brokers, so one turns up
    # once a broker restarted by an earlier test has its share back).
    group = wait_until(lambda: _group_coordinated_elsewhere(cluster, transactional_id), interval=0.5)
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        for offset, commit in ((2, True), (5, False)):
            producer.begin_transaction()
            producer.produce(topic, f"o-{offset}".encode(), partition=0)
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, offset)], consumer.consumer_group_metadata(), 30
            )
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        committed = consumer.committed([TopicPartition(topic, 0)], 30)
        assert committed[0].offset == 2  # the aborted transaction's offsets were dropped
    finally:
        consumer.close()


def test_killing_the_coordinator_mid_transaction_never_leaves_it_half_visible(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic, _ = new_topic(cluster, "txnkill", PARTITIONS)
    transactional_id = f"txk-{uuid.uuid4().hex[:8]}"
    victim = find_coordinator(cluster, 1, transactional_id)
    producer = _producer(cluster, transactional_id)
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, f"x-{p}".encode(), partition=p)
    assert producer.flush(30) == 0  # acknowledged by every leader, not yet committed
    cluster.brokers[victim].kill()
    others = [n for n in (1, 2, 3) if n != victim]
    try:
        producer.commit_transaction(60)  # goes on with the slot's new leader, or fails
    except KafkaException as exc:
        print(f"commit after the coordinator's death failed: {exc}")
    wait_until(lambda: find_coordinator(cluster, others[0], transactional_id) in others, timeout=30)
    again = _producer(cluster, transactional_id)
    again.init_transactions(60)  # finishes or aborts what is left open, fences the first producer
    again.begin_transaction()
    for p in range(PARTITIONS):
        again.produce(topic, f"y-{p}".encode(), partition=p)
    again.commit_transaction(60)
    values = _read(cluster, topic, "read_committed")
    firsts = [v for v in values if v.startswith(b"x-")]
    assert len(firsts) in (0, PARTITIONS), values  # all of the transaction or nothing
    assert [v for v in values if v.startswith(b"y-")] == [f"y-{p}".encode() for p in range(PARTITIONS)]
