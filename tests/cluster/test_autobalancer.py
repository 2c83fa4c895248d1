"""Auto-balancing on the real cluster: every partition of a busy topic is put on one broker; the
controller's balancer moves leaders until every broker's bytes in are within ±20 % of the mean, and
then leaves them alone. ``tabletopic cluster balance --dry-run`` prints the plan."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata, ClusterSnapshot
from tests.support.cluster import LocalCluster, placed, wait_until
from tests.support.kafka_clients import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]

PARTITIONS = 6
TOLERANCE = 0.2


@contextmanager
def steady_load(bootstrap: str, topic: str, bytes_per_second: int) -> Iterator[None]:
    """Writes ``bytes_per_second`` spread evenly over the topic's partitions from a thread."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20})
    value = os.urandom(8192)
    stop = threading.Event()

    def run() -> None:
        sent = 0
        started = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - started) * bytes_per_second / len(value))
            while sent < due:
                try:
                    producer.produce(topic, value=value, partition=sent % PARTITIONS)
                except BufferError:
                    break
                sent += 1
            producer.poll(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)
        producer.flush(30)


def broker_loads(snapshot: ClusterSnapshot, topic: str) -> dict[int, float]:
    """Bytes in per second of ``topic`` on each live broker, as the leaders reported it."""
    loads = {n: 0.0 for n, info in snapshot.nodes.items() if info.alive}
    for node, info in snapshot.nodes.items():
        for key, (bytes_in, _out) in info.load.items():
            name, _, partition = key.rpartition("/")
            row = snapshot.partitions.get((name, int(partition))) if name == topic else None
            if row is not None and row.leader == node:
                loads[node] += bytes_in
    return loads


def balanced(loads: dict[int, float]) -> bool:
    mean = sum(loads.values()) / len(loads)
    return mean > 0 and all(abs(v - mean) <= TOLERANCE * mean for v in loads.values())


def test_balancer_converges_from_a_skewed_load_and_then_stays_put(healthy_cluster: LocalCluster) -> None:
    cluster = healthy_cluster
    topic = f"skew-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.brokers[1].bootstrap, topic, PARTITIONS)
    placed(cluster, topic, PARTITIONS)
    engine = database.create_engine(cluster.metadata_url)
    meta = ClusterMetadata(engine)
    try:
        meta.request_moves([(topic, p, 1) for p in range(PARTITIONS)])  # an operator piles it all on 1
        wait_until(lambda: all(n == 1 for n, _ in cluster.leaders(topic).values()), timeout=20)
        with steady_load(cluster.bootstrap, topic, 3_000_000):
            started = time.monotonic()
            # Skewed first: broker 1 reports all of it.
            wait_until(lambda: broker_loads(meta.snapshot(), topic)[1] > 2_000_000, timeout=30)
            assert not balanced(broker_loads(meta.snapshot(), topic))

            def converged() -> bool:
                return balanced(broker_loads(meta.snapshot(), topic)) and all(
                    a.target is None for k, a in meta.snapshot().partitions.items() if k[0] == topic
                )

            wait_until(converged, timeout=60, interval=0.25)
            took = time.monotonic() - started
            leaders = {p: n for p, (n, _) in cluster.leaders(topic).items()}
            print(f"balancer converged {took:.1f} s after the skewed load started: leaders {leaders}")
            assert len(set(leaders.values())) == 3
            # No thrashing: with the load steady, nothing moves any more.
            time.sleep(6)
            assert {p: n for p, (n, _) in cluster.leaders(topic).items()} == leaders
            assert balanced(broker_loads(meta.snapshot(), topic))
            done = subprocess.run(
                [
                    sys.executable, "-m", "tabletopic", "cluster", "balance", "--dry-run",
                    "--override", f"metadata.url={cluster.metadata_url}",
                    "--override", "auto.balancer.min.bytes.per.second=400000",
                ],
                capture_output=True, text=True, timeout=60,
                env=dict(os.environ, TABLETOPIC_LOG_LEVEL="WARNING"),
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert "broker load" in done.stdout and "within tolerance" in done.stdout, done.stdout
    finally:
        engine.dispose()
