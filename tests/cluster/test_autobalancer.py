"""Auto-balancing on the real cluster: every partition of a busy topic is put on one broker; the
controller's balancer moves leaders until every broker's bytes in are within ±20 % of the mean, and
then leaves them alone. ``tabletopic cluster balance --dry-run`` prints the plan."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata
from tests.support.cluster import CLUSTER_TEST_MARKS, FAST_CLUSTER, LocalCluster, new_topic, wait_until
from tests.support.cluster_load import balanced, broker_loads, steady_load

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 6


def test_balancer_converges_from_a_skewed_load_and_then_stays_put(healthy_cluster: LocalCluster) -> None:
    cluster = healthy_cluster
    topic, _ = new_topic(cluster, "skew", PARTITIONS)
    engine = database.create_engine(cluster.metadata_url)
    meta = ClusterMetadata(engine)
    try:
        meta.request_moves([(topic, p, 1) for p in range(PARTITIONS)])  # an operator piles it all on 1
        wait_until(lambda: all(n == 1 for n, _ in cluster.leaders(topic).values()), timeout=60)
        with steady_load(cluster.bootstrap, topic, PARTITIONS, 3_000_000):
            started = time.monotonic()
            # Skewed first: broker 1 reports all of it, past the load the balancer acts on. Waiting
            # for more (a third of the 3 MB/s asked for, as before) raced the balancer: it moved
            # leaders as soon as broker 1 passed its threshold, and broker 1 then reached 1 MB/s
            # only with its balanced share, so the skew was never seen.
            trigger = float(FAST_CLUSTER["auto.balancer.min.bytes.per.second"])

            def skewed() -> bool:
                loads = broker_loads(meta.snapshot(), topic)
                return loads[1] > trigger and not balanced(loads)

            wait_until(skewed, timeout=60)

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
            time.sleep(6)  # the subject: watching that nothing moves (several balancer rounds)
            assert {p: n for p, (n, _) in cluster.leaders(topic).items()} == leaders
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
            # Piped, the load table is plain tab-separated lines: its header, then a row per broker.
            # Balanced, the plan moves nothing. Its note says why, from the rates of that moment:
            # "within tolerance", or, when one broker's rate dipped (a run saw -26 % with two
            # partitions a broker), that no move improves the balance.
            assert "broker\tin\tout" in done.stdout and "\nno moves: " in done.stdout, done.stdout
    finally:
        engine.dispose()
