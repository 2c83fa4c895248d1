"""A cluster's table topics seen and driven from any broker: ``/v1/tables``, ``tabletopic tables``
and the console of a broker that does not coordinate a table topic answer for it by asking the one
that does, and keep answering, within a bound, while that broker is paused or killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tabletopic.api.cluster_tables import FORWARDED, PEER_TIMEOUT_S, UNREACHABLE
from tabletopic.table.table_config import sanitize_table_name
from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, placed, wait_until
from tests.support.cluster_tables import move_partition
from tests.support.table_node import table_configs

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 3


def _table_topic(cluster: LocalCluster, prefix: str, coordinator: int, commit_interval_ms: int) -> str:
    """A new table topic whose partition 0 (so its table coordinator) is on ``coordinator``."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    configs = table_configs(commit_interval_ms=str(commit_interval_ms))
    new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1, config=configs)
    admin.create_topics([new])[topic].result(30)
    placed(cluster, topic, PARTITIONS)
    move_partition(cluster, topic, 0, coordinator)

    def coordinated_there_alone() -> bool:
        # The broker that led partition 0 first lets its coordinator go at its next poll, a moment
        # after the partition moved: until then both list the topic as their own.
        return all((topic in _own_tables(cluster, n)) == (n == coordinator) for n in cluster.running())

    wait_until(coordinated_there_alone, timeout=30)
    return topic


def _own_tables(cluster: LocalCluster, node: int) -> dict[str, dict[str, Any]]:
    """The table topics broker ``node`` coordinates itself (asked as a peer asks it)."""
    answer = httpx.get(f"{cluster.brokers[node].admin_url}/v1/tables", headers={FORWARDED: "1"}, timeout=10)
    return {row["topic"]: row for row in answer.json()}


def _listed(cluster: LocalCluster, node: int, topic: str) -> dict[str, Any] | None:
    answer = httpx.get(f"{cluster.brokers[node].admin_url}/v1/tables", timeout=3 * PEER_TIMEOUT_S)
    answer.raise_for_status()
    return next((row for row in answer.json() if row["topic"] == topic), None)


def _produce(cluster: LocalCluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def test_a_broker_that_does_not_coordinate_a_table_topic_lists_describes_and_drives_it(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    # A commit interval no test waits for: the rows below are committed by "commit now" alone.
    topic = _table_topic(cluster, "anywhere", coordinator=3, commit_interval_ms=900_000)
    one = cluster.brokers[1].admin_url
    assert topic not in _own_tables(cluster, 1)

    row = _listed(cluster, 1, topic)
    assert (
        row is not None
        and row["coordinator"] == 3
        and row["table"] == f"default.{sanitize_table_name(topic)}"
    )

    _produce(cluster, topic, 20)
    answer = httpx.post(f"{one}/v1/tables/{topic}/commit", timeout=15)
    assert answer.status_code == 200 and answer.json() == {"triggered": topic}, answer.text

    def described() -> dict[str, Any] | None:
        found = httpx.get(f"{one}/v1/tables/{topic}", timeout=15).json()
        return found if found["rows_committed"] == 20 else None

    status = wait_until(described, timeout=60)
    assert status["coordinator"] == 3 and status["lag_records"] == 0

    # Pause and resume through broker 2 act on broker 3's pipeline.
    two = cluster.brokers[2].admin_url
    assert httpx.post(f"{two}/v1/tables/{topic}/pause", timeout=15).json() == {"paused": topic}
    assert _own_tables(cluster, 3)[topic]["state"] == "PAUSED"
    assert httpx.post(f"{two}/v1/tables/{topic}/resume", timeout=15).json() == {"resumed": topic}
    wait_until(lambda: _own_tables(cluster, 3)[topic]["state"] != "PAUSED", timeout=15)

    # `tabletopic tables` pointed at broker 1, as a user whose admin.listener names it.
    listed = subprocess.run(
        [sys.executable, "-m", "tabletopic", "tables", "--admin-url", one, "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if topic in line)
    assert "broker 3" in line and "20" in line

    # The console of broker 1 lists it and sends its page to broker 3, where its plots are.
    page = httpx.get(f"{one}/tables", timeout=15).text
    three = cluster.brokers[3].admin_url
    assert f'href="{three}/tables/{topic}"' in page
    moved = httpx.get(f"{one}/tables/{topic}", timeout=15, follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == f"{three}/tables/{topic}"

    # Its overview counts every table topic of the cluster, as the listing does.
    every = httpx.get(f"{one}/v1/tables", timeout=3 * PEER_TIMEOUT_S).json()
    assert f'<a href="/tables">{len(every)} table topics</a>' in httpx.get(f"{one}/", timeout=15).text

    missing = httpx.get(f"{one}/v1/tables/no-such-{topic}", timeout=15)
    assert missing.status_code == 404 and "is not a table topic" in missing.json()["detail"]


def test_with_its_coordinator_paused_then_killed_a_table_topic_is_still_answered_for(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic = _table_topic(cluster, "orphaned", coordinator=3, commit_interval_ms=1000)
    _produce(cluster, topic, 30)
    process = cluster.brokers[3].process
    assert process is not None
    os.kill(process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        row = _listed(cluster, 1, topic)
        took = time.monotonic() - started
    finally:
        process.kill()  # the paused coordinator is killed in turn
        process.wait(30)
    # Not hung on the paused broker: it answers within the peer timeout, saying who did not answer.
    assert took < PEER_TIMEOUT_S + 3, took
    assert row is not None and row["state"] == UNREACHABLE and row["coordinator"] == 3, row
    assert "broker 3 did not answer" in row["last_error"]

    # Once another broker leads partition 0, the listing shows its coordinator there, with every
    # record committed, from any broker left.
    _produce(cluster, topic, 30)

    def taken_over() -> dict[str, Any] | None:
        found = _listed(cluster, 2, topic)
        if found is None or found["coordinator"] == 3 or found["rows_committed"] != 60:
            return None
        return found

    row = wait_until(taken_over, timeout=90)
    assert row["coordinator"] in (1, 2) and row["lag_records"] == 0
    described = httpx.get(f"{cluster.brokers[1].admin_url}/v1/tables/{topic}", timeout=15)
    assert described.status_code == 200 and described.json()["rows_committed"] == 60
