"""Cluster-mode figures on this machine: 3 ``tabletopic serve`` brokers on loopback sharing one
PostgreSQL database and one SeaweedFS bucket (the test cluster's settings).

Sections (``--sections``, comma separated):

- ``balancer``: auto-balancer convergence. A topic's partitions are all piled on one broker and a
  steady producer writes ``--balancer-rate`` bytes/s spread over them; the time from the start of
  the load until every broker's bytes in are within ±20 % of the mean (and no move is pending),
  over ``--repeats`` runs (p50/max), with the number of moves. The same-run baseline is the floor
  of any load-driven balancer: one metrics window (the load must be measured) plus one detection
  interval; the ratio says how many floors convergence took.

Usage: python bench/cluster_bench.py [--sections balancer] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabletopic import database  # noqa: E402
from tabletopic.cluster.db import ClusterMetadata  # noqa: E402
from tests.support.cluster import FAST_CLUSTER, LocalCluster, placed, wait_until  # noqa: E402
from tests.support.cluster_load import balanced, broker_loads, steady_load  # noqa: E402
from tests.support.kafka_clients import create_topic  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402
from tests.support.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedFS  # noqa: E402


@contextmanager
def local_cluster(nodes: int = 3) -> Iterator[LocalCluster]:
    """PostgreSQL, SeaweedFS and ``nodes`` brokers, all stopped on exit."""
    root = Path(tempfile.mkdtemp(prefix="tabletopic-cluster-bench-"))
    postgres = PostgresServer().start()
    seaweed = SeaweedFS(root / "s3").start()
    s3 = {
        "s3.endpoint": seaweed.endpoint,
        "s3.bucket": seaweed.bucket,
        "s3.region": "us-east-1",
        "s3.access.key": ACCESS_KEY,
        "s3.secret.key": SECRET_KEY,
        "s3.path.style": "true",
    }
    cluster = LocalCluster(root, postgres.create_database("bench"), s3)
    try:
        for node in range(1, nodes + 1):
            cluster.start(node)
        wait_until(lambda: len(cluster.metadata(1).brokers) == nodes, timeout=60)
        yield cluster
    finally:
        cluster.stop_all()
        seaweed.stop()
        postgres.stop()


def balancer_convergence(cluster: LocalCluster, rate: int, partitions: int = 6) -> tuple[float, int]:
    """Seconds from the start of a skewed load until balanced, and the leadership moves made."""
    topic = f"skew-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.brokers[1].bootstrap, topic, partitions)
    placed(cluster, topic, partitions)
    engine = database.create_engine(cluster.metadata_url)
    meta = ClusterMetadata(engine)
    try:
        meta.request_moves([(topic, p, 1) for p in range(partitions)])
        wait_until(lambda: all(n == 1 for n, _ in cluster.leaders(topic).values()), timeout=30)
        epochs = {p: e for p, (_, e) in cluster.leaders(topic).items()}
        with steady_load(cluster.bootstrap, topic, partitions, rate):
            started = time.monotonic()

            def converged() -> bool:
                snapshot = meta.snapshot()
                pending = any(a.target is not None for k, a in snapshot.partitions.items() if k[0] == topic)
                return not pending and balanced(broker_loads(snapshot, topic))

            wait_until(lambda: broker_loads(meta.snapshot(), topic)[1] > 0, timeout=30, interval=0.05)
            wait_until(converged, timeout=120, interval=0.1)
            took = time.monotonic() - started
        moves = sum(e - epochs[p] for p, (_, e) in cluster.leaders(topic).items())
        return took, moves
    finally:
        engine.dispose()


def run_balancer(cluster: LocalCluster, repeats: int, rate: int) -> None:
    window = int(FAST_CLUSTER["auto.balancer.metrics.window.ms"]) / 1000
    detect = int(FAST_CLUSTER["auto.balancer.detect.interval.ms"]) / 1000
    floor = window + detect
    times, moves = [], []
    for run in range(repeats):
        took, moved = balancer_convergence(cluster, rate)
        times.append(took)
        moves.append(moved)
        print(f"  run {run + 1}: converged in {took:.2f} s with {moved} moves")
    p50 = statistics.median(times)
    print(f"balancer convergence ({rate / 1e6:.1f} MB/s on 6 partitions piled on one of 3 brokers):")
    print(f"  p50 {p50:.2f} s, max {max(times):.2f} s, moves per run {moves}")
    print(f"  baseline (metrics window {window:.1f} s + detect interval {detect:.1f} s) {floor:.1f} s;")
    print(f"  ratio p50/baseline {p50 / floor:.2f}, max/baseline {max(times) / floor:.2f}")
    print("  (AutoMQ defaults: 10 s reports, 60 s detection, so at least ~70 s; shared machine)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sections", default="balancer")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--balancer-rate", type=int, default=3_000_000, help="bytes/s of the skewed load")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    with local_cluster() as cluster:
        if "balancer" in sections:
            run_balancer(cluster, args.repeats, args.balancer_rate)


if __name__ == "__main__":
    main()
