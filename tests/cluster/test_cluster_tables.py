"""Table topics on the 3-broker cluster: the table coordinator runs on the leader of partition 0,
fenced by that partition's leader epoch; killed mid-commit, it is replaced on another broker within
the commit interval plus 10 s and the table keeps every acknowledged record exactly once. Every node
serves the schema registry and the REST catalog from the shared database."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from tabletopic.table.commit import COORDINATOR_PROPERTY, EPOCH_PROPERTY, OFFSETS_PROPERTY
from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, placed, wait_until
from tests.support.cluster_tables import (
    COMMIT_INTERVAL_S,
    PARTITIONS,
    committed,
    create_table_topic,
    load_table,
    move_partition,
)
from tests.support.table_node import assert_exactly_once
from tests.support.table_producers import SteadyProducer

pytestmark = CLUSTER_TEST_MARKS


def test_table_keeps_every_record_once_when_the_coordinator_node_is_killed_mid_commit(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    victim = 3
    # The victim dies (SIGKILL, by its own crash point) at its second table commit, between the
    # coordinator's fence check and the Iceberg commit.
    cluster.brokers[victim].kill()
    cluster.start(victim, env={"TABLETOPIC_CRASH_AT": "table.fence_checked:2"})
    wait_until(lambda: all(len(cluster.metadata(n).brokers) == 3 for n in (1, 2, 3)), timeout=30)
    topic = f"tbl-{uuid.uuid4().hex[:8]}"
    create_table_topic(cluster, topic)
    placed(cluster, topic, PARTITIONS)
    move_partition(cluster, topic, 0, victim)  # the victim coordinates the table
    process = cluster.brokers[victim].process
    assert process is not None
    # Keyed records round-robin at 500 a second.
    feeder = SteadyProducer(
        cluster.bootstrap, topic, PARTITIONS, rate=500, overrides={"retry.backoff.max.ms": 300}
    )
    feeder.start()
    try:
        wait_until(lambda: process.poll() is not None, timeout=90, interval=0.05)
        died_at = time.time()
        cluster.brokers[victim].process = None
        # Keep writing while partitions and the coordinator move to the survivors.
        wait_until(lambda: victim not in {n for n, _ in cluster.leaders(topic, via=1).values()}, timeout=60)
        sent = feeder.sent
        wait_until(lambda: feeder.sent >= sent + 500, timeout=30, interval=0.05)
    finally:
        feeder.stop()
    feeder.finish()
    assert not feeder.log.errors, feeder.log.errors[:5]
    survivor = 1
    table = wait_until(lambda: load_table(cluster, survivor, topic), timeout=30)

    def resumed() -> Any:
        for snapshot in table.refresh().metadata.snapshots:
            props = snapshot.summary.additional_properties if snapshot.summary else {}
            if snapshot.timestamp_ms / 1000 > died_at and OFFSETS_PROPERTY in props:
                return snapshot
        return None

    first = wait_until(resumed, timeout=COMMIT_INTERVAL_S + 30, interval=0.2)
    props = first.summary.additional_properties
    took = first.timestamp_ms / 1000 - died_at
    print(f"table commits resumed {took:.2f} s after the coordinator died, on {props[COORDINATOR_PROPERTY]}")
    assert not props[COORDINATOR_PROPERTY].endswith(f"/broker-{victim}")
    assert took <= COMMIT_INTERVAL_S + 10
    ends = feeder.log.end_offsets()
    wait_until(
        lambda: all(committed(table).get(p, 0) >= end for p, end in ends.items()), timeout=60, interval=0.3
    )
    rows = table.refresh().scan().to_arrow().to_pylist()
    assert_exactly_once(rows, feeder.log)
    # Coordinator epochs (partition 0's leader epochs) only grow along the table's history.
    epochs = [
        int(s.summary.additional_properties[EPOCH_PROPERTY])
        for s in sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
        if s.summary is not None and EPOCH_PROPERTY in s.summary.additional_properties
    ]
    assert epochs == sorted(epochs) and epochs[-1] > epochs[0]


def test_every_node_serves_the_registry_and_the_catalog_from_the_shared_database(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    subject = f"s-{uuid.uuid4().hex[:8]}-value"
    schema = '{"type":"record","name":"r","fields":[{"name":"a","type":"long"}]}'
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    registered = httpx.post(
        f"{cluster.registry_url(1)}/subjects/{subject}/versions",
        json={"schema": schema},
        headers=headers,
        timeout=10,
    )
    registered.raise_for_status()
    schema_id = registered.json()["id"]
    for node in (2, 3):
        answer = httpx.get(f"{cluster.registry_url(node)}/schemas/ids/{schema_id}", timeout=10)
        assert answer.status_code == 200, answer.text
        assert '"a"' in answer.json()["schema"]
    topic = f"shared-{uuid.uuid4().hex[:8]}"
    create_table_topic(cluster, topic)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    tables = [wait_until(lambda n=n: load_table(cluster, n, topic), timeout=30) for n in (1, 2, 3)]
    wait_until(lambda: sum(committed(tables[0]).values()) == 30, timeout=30)
    snapshots = {t.refresh().metadata.current_snapshot_id for t in tables}
    assert len(snapshots) == 1
    assert len(tables[2].scan().to_arrow()) == 30
