"""A table topic fed by transactional producers in a cluster holds exactly the committed records,
also for the partitions that brokers other than the table's coordinator lead: their last stable
offset comes from their leader and their aborted transactions from the durable aborted index. A
leader killed while the table coordinator asks it leaves its partition out of the cycles (which go
on) until the partition's new leader answers; then the partition is ingested exactly once."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from confluent_kafka import Producer

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, find_coordinator, placed, wait_until
from tests.support.kafka_clients import create_topic, transactional_producer
from tests.support.table_node import table_configs

pytestmark = CLUSTER_TEST_MARKS

# Partitions 0-2 carry the transactions; partition 3 only the plain sentinels that show a table
# cycle has run after the open transaction's records were acknowledged.
TXN_PARTITIONS = 3
SENTINEL = 3


def _values(cluster: LocalCluster, topic: str) -> list[bytes]:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    from tabletopic.table.table_config import sanitize_table_name

    node = next(iter(cluster.running()))
    catalog = load_catalog(f"c{node}", type="rest", uri=cluster.catalog_url(node))
    try:
        table = catalog.load_table(f"default.{sanitize_table_name(topic)}")
    except NoSuchTableError:
        return []
    rows: list[dict[str, Any]] = table.scan().to_arrow().to_pylist()
    keys = Counter((r["_kafka_metadata"]["partition"], r["_kafka_metadata"]["offset"]) for r in rows)
    assert not keys or max(keys.values()) == 1, keys  # every offset at most once
    return sorted(r["_kafka_value"] for r in rows)


def _transactional(cluster: LocalCluster, name: str, transactional_id: str | None = None) -> Producer:
    """A transactional producer, initialised (its id ``transactional_id``, or a new one)."""
    transactional_id = transactional_id or f"{name}-{uuid.uuid4().hex[:8]}"
    producer = Producer(transactional_producer(cluster.bootstrap, transactional_id))
    producer.init_transactions(30)
    return producer


def _send(producer: Producer, topic: str, tag: str) -> list[bytes]:
    values = [f"{tag}-{p}".encode() for p in range(TXN_PARTITIONS)]
    for p, value in enumerate(values):
        producer.produce(topic, value, partition=p)
    assert producer.flush(30) == 0  # acknowledged by each partition's leader
    return values


def test_table_of_transactional_topic_holds_only_committed_records_on_every_leader(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic = f"tbltx_{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, TXN_PARTITIONS + 1, table_configs())
    leaders = placed(cluster, topic, TXN_PARTITIONS + 1)
    coordinator = leaders[0][0]  # the leader of partition 0 runs the table's coordinator
    assert any(leaders[p][0] != coordinator for p in range(1, TXN_PARTITIONS)), leaders

    plain = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})

    def sentinel(value: bytes) -> None:
        plain.produce(topic, value, partition=SENTINEL)
        assert plain.flush(30) == 0
        wait_until(lambda: value in _values(cluster, topic), timeout=30, interval=0.3)

    writer = _transactional(cluster, "writer")
    writer.begin_transaction()
    committed = _send(writer, topic, "committed")
    writer.commit_transaction(30)
    holder = _transactional(cluster, "holder")
    writer.begin_transaction()
    aborted = _send(writer, topic, "aborted")
    holder.begin_transaction()
    held = _send(holder, topic, "open")  # stays open while the table commits
    # Aborted below the open transaction's start, its ABORT marker above: the table's ranges end
    # between the two, so only the aborted index tells that these records are to be dropped.
    writer.abort_transaction(30)
    writer.begin_transaction()
    later = _send(writer, topic, "later")  # committed, but past the open transaction's start
    writer.commit_transaction(30)

    # Two sentinels one after the other: the table cycle that took the second one started after
    # the first was in the table, so after every record above was acknowledged.
    sentinel(b"s-1")
    sentinel(b"s-2")
    assert _values(cluster, topic) == sorted([*committed, b"s-1", b"s-2"])

    holder.commit_transaction(30)
    expected = sorted([*committed, *held, *later, b"s-1", b"s-2"])
    wait_until(lambda: _values(cluster, topic) == expected, timeout=30, interval=0.3)
    assert not set(aborted) & set(_values(cluster, topic))


def test_a_leader_killed_while_the_table_asks_it_is_ingested_once_its_successor_answers(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic = f"tbltxkill_{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 4, table_configs())
    leaders = placed(cluster, topic, 4)
    coordinator = leaders[0][0]  # runs the table's coordinator, and stays up
    # The victim leads a partition and coordinates neither the table nor the two transactional
    # ids (the transaction coordinators' slots can all sit on one broker after earlier restarts, so
    # the ids are drawn until some partition's leader is free of both roles).
    moving = None
    for _attempt in range(50):
        ids = {name: f"{name}-{uuid.uuid4().hex[:8]}" for name in ("writer", "holder")}
        busy = {coordinator, *(find_coordinator(cluster, coordinator, tid) for tid in ids.values())}
        moving = next((p for p in (1, 2, 3) if leaders[p][0] not in busy), None)
        if moving is not None:
            break
    assert moving is not None, f"no partition led by a broker free of coordinator roles: {leaders}"
    victim = leaders[moving][0]
    # Partition 0 takes plain sentinels (a table cycle ran after what came before); only the victim's
    # partition takes transactions, from producers whose coordinator is not the victim.
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})

    def sentinel(value: bytes) -> None:
        plain.produce(topic, value, partition=0)
        assert plain.flush(30) == 0
        wait_until(lambda: value in _values(cluster, topic), timeout=60, interval=0.3)

    def transaction(producer: Producer, values: list[bytes], commit: bool) -> None:
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value, partition=moving)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)

    writer = _transactional(cluster, "writer", ids["writer"])
    holder = _transactional(cluster, "holder", ids["holder"])
    committed = [b"c-1", b"c-2"]
    transaction(writer, committed, commit=True)
    holder.begin_transaction()
    held = [b"open-1", b"open-2"]
    for value in held:
        holder.produce(topic, value, partition=moving)
    assert holder.flush(30) == 0  # acknowledged by the victim, open
    transaction(writer, [b"aborted-1"], commit=False)
    sentinel(b"s-1")
    assert _values(cluster, topic) == sorted([*committed, b"s-1"])

    cluster.brokers[victim].kill()  # while the table's cycles ask it every 200 ms
    sentinel(b"s-2")  # the cycles go on without the victim's partition

    def moved() -> bool:
        return all(node != victim for node, _ in placed(cluster, topic, 4).values())

    wait_until(moved, timeout=60, interval=0.5)
    sentinel(b"s-3")  # after the new leader rebuilt the open transaction: still not past it
    assert _values(cluster, topic) == sorted([*committed, b"s-1", b"s-2", b"s-3"])

    holder.abort_transaction(60)  # its marker goes to the new leader
    later = [b"later-1", b"later-2"]
    transaction(writer, later, commit=True)
    expected = sorted([*committed, *later, b"s-1", b"s-2", b"s-3"])
    wait_until(lambda: _values(cluster, topic) == expected, timeout=60, interval=0.3)
