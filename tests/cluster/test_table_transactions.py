"""A table topic fed by transactional producers in a cluster holds exactly the committed records,
also for the partitions that brokers other than the table's coordinator lead: their last stable
offset comes from their leader and their aborted transactions from the durable aborted index."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.cluster import LocalCluster, placed, wait_until
from tests.support.kafka_clients import create_topic
from tests.support.table_node import table_configs

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]

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


def _transactional(cluster: LocalCluster, name: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": f"{name}-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 200,
        }
    )
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
