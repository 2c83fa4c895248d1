"""Failover: a leader killed with SIGKILL under an idempotent acks=all producer; the controller
moves its partitions, the new leaders take the streams over with a newer epoch and the producer
state with them, and every acknowledged message is read back exactly once."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections import Counter

import httpx
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tabletopic.config import EXIT_REJOIN
from tests.support.cluster import (
    CLUSTER_TEST_MARKS,
    LocalCluster,
    new_topic,
    placed,
    produce_raw,
    produce_raw_answer,
    wait_until,
)
from tests.support.kafka_clients import failover_producer, read_values

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 12


def test_idempotent_producer_loses_and_duplicates_nothing_when_a_leader_is_killed(
    cluster_on_each_wal: LocalCluster,
) -> None:
    cluster = cluster_on_each_wal
    topic, leaders = new_topic(cluster, "failover", PARTITIONS)
    victim = leaders[0][0]
    acked: list[bytes] = []
    failed: list[str] = []
    acked_at: dict[int, list[float]] = {}

    def delivered(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.append(msg.value())  # type: ignore[attr-defined]
            acked_at.setdefault(msg.partition(), []).append(time.monotonic())  # type: ignore[attr-defined]

    producer = Producer(failover_producer(cluster.bootstrap, {"message.timeout.ms": 60_000}))
    total = 3000
    killed_at = 0.0
    for i in range(total):
        producer.produce(topic, value=f"m-{i}".encode(), partition=i % PARTITIONS, on_delivery=delivered)
        producer.poll(0)
        time.sleep(0.002)  # the subject: a steady rate across the kill
        if i == total // 3:
            process = cluster.brokers[victim].process
            assert process is not None
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
            cluster.brokers[victim].process = None
            killed_at = time.monotonic()
    assert producer.flush(90) == 0
    assert not failed, failed[:5]
    after = [t for t in acked_at.get(0, []) if t > killed_at]
    print(f"partition 0 accepted writes again {after[0] - killed_at:.2f} s after the kill of broker {victim}")
    new_leaders = placed(cluster, topic, PARTITIONS)
    assert all(node != victim for node, _ in new_leaders.values())
    assert new_leaders[0][1] > leaders[0][1]  # a newer leader epoch
    values = read_values(cluster.bootstrap, topic, PARTITIONS, len(acked))
    counts = Counter(values)
    duplicates = [v for v, n in counts.items() if n > 1]
    assert not duplicates, duplicates[:5]
    assert set(acked) <= set(values)
    assert len(acked) == total


def test_a_paused_broker_whose_lease_was_taken_cannot_acknowledge(healthy_cluster: LocalCluster) -> None:
    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "paused", 3)
    victim, _ = leaders[0]
    wait_until(lambda: produce_raw(cluster, victim, topic, 0, b"before") == 0, timeout=10)
    process = cluster.brokers[victim].process
    assert process is not None
    os.kill(process.pid, signal.SIGSTOP)  # a broker cut off: it cannot renew its lease
    try:
        others = [n for n in (1, 2, 3) if n != victim]
        wait_until(lambda: cluster.leaders(topic, via=others[0])[0][0] != victim, timeout=20)
        # The new leader first opens the stream (fencing the paused owner): allow a slow machine.
        # Follow the leader as a client does: until the controller has placed the partition,
        # Metadata names a predicted leader, which may not be the broker the controller picks.
        answers: Counter[tuple[int, int, str | None]] = Counter()

        def accepted_by_the_leader() -> bool:
            leader = cluster.leaders(topic, via=others[0])[0][0]
            if leader == victim:
                return False
            code, message = produce_raw_answer(cluster, leader, topic, 0, b"after")
            answers[(leader, code, message)] += 1
            return code == 0

        try:
            wait_until(accepted_by_the_leader, timeout=30)
        except TimeoutError as exc:  # say what the brokers answered meanwhile
            raise AssertionError(f"no live broker took the produce: {dict(answers)}") from exc
    finally:
        os.kill(process.pid, signal.SIGCONT)
    # Woken up, the deposed broker still believes it leads for a moment: it must not acknowledge
    # (it refuses, or it has already ended).
    try:
        assert produce_raw(cluster, victim, topic, 0, b"stale") != 0
    except OSError:
        pass
    values = _read_all_partition(cluster, topic, 0)
    assert b"stale" not in values
    assert values.count(b"before") == 1 and values.count(b"after") >= 1
    if cluster.wal == "shared":
        # Its WAL was taken over: the node ends with EXIT_REJOIN, for its supervisor to start it
        # again (at once: it no longer tries to upload what its recoverer owns, which took the
        # whole append.timeout.ms of 30 s), and started again it joins as a new incarnation.
        assert process.wait(timeout=20) == EXIT_REJOIN
        # It did not leave on its own: the takeover retired it, and every broker shows it dead,
        # as a killed one (it was shown "stopped", as if shut down cleanly).
        shown = httpx.get(f"{cluster.brokers[others[0]].admin_url}/v1/cluster", timeout=15).json()
        assert {b["node_id"]: b["state"] for b in shown["brokers"]}[victim] == "dead"
        cluster.start_many([victim])
        wait_until(lambda: all(len(cluster.metadata(n).brokers) == 3 for n in (1, 2, 3)), timeout=30)


def _read_all_partition(cluster: LocalCluster, topic: str, partition: int) -> list[bytes]:
    """Every value of the partition up to its end (the partition EOF: nothing more is readable)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"c-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is None:
                values.append(msg.value())
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                return values
        raise AssertionError(f"the end of {topic}/{partition} not reached in 30 s; read {values}")
    finally:
        consumer.close()
