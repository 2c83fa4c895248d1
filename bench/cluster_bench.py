"""Cluster figures on this machine (PostgreSQL + SeaweedFS + brokers on loopback, all on the same
cores): what a cluster of stateless brokers costs and how fast ownership moves.

- failover: a broker leading partition 0 is killed with SIGKILL under a steady idempotent acks=all
  producer; per moved partition, the time from the kill to its first acknowledged write afterwards
  (p50 over every moved partition, and p50/max over kills of the slowest partition of each kill);
- reassignment under load: AlterPartitionReassignments of one partition to another broker, time
  from the request to the first write acknowledged by the new leader (p50/max);
- produce throughput with 1, 2 and 3 brokers (one confluent-kafka producer, acks=all, 1 KiB), and
  the ratio to one broker;
- transactional produce with 3 brokers (``--txn-size`` messages per transaction, committed through
  the transaction coordinator's markers on every partition's leader) against an idempotent producer
  of the same run (ratio; the issue's target is >= 0.8), with the p50 commit time: twice, the arms
  alternating, each once the brokers are quiet again (what the idempotent arm wrote is still being
  uploaded and merged for seconds after it);
- auto-balancer convergence (``--balancer-repeats``, 0 skips; on the test cluster's fast balancer
  settings): a topic's 6 partitions piled on one of 3 brokers under a steady 3 MB/s; the time from
  the start of the load until every broker's bytes in are within ±20 % of the mean with no move
  pending (p50/max, moves per run). The same-run baseline is the floor of any load-driven balancer,
  one metrics window plus one detection interval; the ratio says how many floors it took.

- scale (``--partitions N``, run alone): PostgreSQL, SeaweedFS and 3 brokers; N partitions created
  in topics of ``--topic-partitions`` (seconds until CreateTopics answered and until the controller
  placed them all), one write to every partition (seconds until every one is acknowledged),
  Metadata for all topics (p50 per broker over several calls, timed to the last byte of the answer,
  not decoded), idle CPU of every broker and of PostgreSQL over ``--idle-seconds`` (from /proc)
  before the writes and after them,
  then kill -9 of one broker that is not the controller: seconds until the controller placed all
  its partitions elsewhere, and per partition it led until a produce to it is acknowledged (p50
  and the last). Targets at 10,000 partitions: Metadata <= 100 ms, idle CPU <= 10 % of a core per
  broker and <= 5 % for PostgreSQL, creation <= 20 s. With ``--open-transactions`` a transactional
  producer first writes one record to every partition the doomed broker leads and leaves its
  transaction open, so each new leader also rebuilds an open transaction from the partition's log.

AutoMQ's published figures for comparison: partition reassignment about 1.5 s; failover is bounded
by its broker session timeout (9 s by default) plus the reassignment; its AutoBalancer reports
load every 10 s and detects every 60 s.

- write path (``--only-write-path``, run alone; see bench/write_path.py): one node on its local WAL,
  the 3-broker cluster on the object WAL and on the shared WAL (``--wal-kinds``): p50/p99 at
  ``--rate`` msg/s, MB/s flat out, ratios to the single node, PUTs/s per broker and their monthly
  cost at S3 Standard and S3 Express One Zone request prices; ``--write-path-partitions`` spreads the
  same rate over more partitions (1,200 is the fault run's large size).

Failover is measured per WAL kind (``--wal shared --wal object``, default both; each on a cluster of
its own, ``--only-failover`` for nothing else): on the shared WAL it includes the takeover (fence,
replay, commit) between the lease expiry and the partitions' move.

Usage: python bench/cluster_bench.py [--kills 5] [--moves 5] [--seconds 5] [--rate 2000] [--wal K]
       [--balancer-repeats 3] [--only-balancer] [--txn-size 1000] [--only-transactions]
       python bench/cluster_bench.py --only-failover [--wal shared] [--kills 5] [--rate 2000]
       python bench/cluster_bench.py --only-write-path [--wal-kinds local,object,shared] [--rate 2000]
       [--seconds 10] [--write-path-partitions 12] [--linger-ms 5] [--split-cores]
       [--broker-set s3stream.wal.object.max.in.flight.uploads=2]
       python bench/cluster_bench.py --partitions 10000 [--topic-partitions 100] [--idle-seconds 20]
       [--open-transactions]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from write_path import run_write_path  # noqa: E402

from tabletopic import database  # noqa: E402
from tabletopic.broker.wire_client import call  # noqa: E402
from tabletopic.cluster.db import ClusterMetadata  # noqa: E402
from tabletopic.cluster.local import LocalCluster  # noqa: E402
from tests.support.cluster import FAST_CLUSTER, wait_until  # noqa: E402
from tests.support.cluster import LocalCluster as TestCluster  # noqa: E402
from tests.support.cluster import placed as wait_placed  # noqa: E402
from tests.support.cluster_load import balanced, broker_loads, steady_load  # noqa: E402
from tests.support.kafka_clients import create_topic as create_test_topic  # noqa: E402
from tests.support.kafka_clients import failover_producer  # noqa: E402
from tests.support.kafka_requests import request as kafka_request  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402
from tests.support.processes import descendants  # noqa: E402
from tests.support.raw_kafka_client import connect, encode_request, read_frame  # noqa: E402
from tests.support.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedFS  # noqa: E402

PARTITIONS = 12
SETTINGS = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "s3stream.wal.object.batch.ms": "50",
    "table.job.runner": "inprocess",
    "offsets.topic.num.partitions": "6",
}


class Load:
    """A steady idempotent acks=all producer with per-partition acknowledgement times."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        self.topic, self.rate = topic, rate
        self.acks: dict[int, list[float]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer(
            failover_producer(
                bootstrap,
                {
                    "retry.backoff.ms": 20,
                    "retry.backoff.max.ms": 100,
                    "reconnect.backoff.ms": 20,
                    "reconnect.backoff.max.ms": 200,
                    "message.timeout.ms": 60_000,
                },
            )
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acks[msg.partition()].append(time.monotonic())  # type: ignore[attr-defined]

    def _run(self) -> None:
        i = 0
        interval = 1 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._producer.produce(
                self.topic, value=b"x" * 100, partition=i % PARTITIONS, on_delivery=self._delivered
            )
            i += 1
            self._producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def first_ack_after(self, partition: int, moment: float, timeout: float = 60) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            later = [t for t in self.acks[partition] if t > moment]
            if later:
                return later[0] - moment
            time.sleep(0.01)
        return float("nan")

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._producer.flush(60)


def cluster_root(prefix: str) -> Path:
    """A fresh directory for a cluster: as root, PostgreSQL runs as `postgres`, who must reach its
    data directory below it (mkdtemp makes it 0700)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o711)
    return root


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    answer = call(
        bootstrap,
        3,
        12,
        topics=[{"name": topic, "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return {p.partition_index: int(p.leader_id) for p in answer.topics[0].partitions}


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
    time.sleep(1)


def throughput(bootstrap: str, topic: str, seconds: float, idempotent: bool = False) -> float:
    """Messages per second acknowledged by one producer writing as fast as it can (1 KiB)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "enable.idempotence": idempotent,
        }
    )
    acked = [0]

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is None:
            acked[0] += 1

    payload = b"y" * 1024
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < seconds:
        try:
            producer.produce(topic, value=payload, partition=i % PARTITIONS, on_delivery=delivered)
            i += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    return acked[0] / (time.monotonic() - started)


def transactional_throughput(bootstrap: str, topic: str, seconds: float, size: int) -> tuple[float, float]:
    """Messages per second committed by one transactional producer (``size`` messages of 1 KiB
    per transaction, spread over every partition), and the p50 time of commit_transaction."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
            "acks": "all",
            "linger.ms": 20,
            "batch.size": 1 << 20,
        }
    )
    producer.init_transactions(60)
    payload = b"t" * 1024
    committed, commits = 0, []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        producer.begin_transaction()
        for i in range(size):
            while True:
                try:
                    producer.produce(topic, value=payload, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        asked = time.monotonic()
        producer.commit_transaction(60)
        commits.append(time.monotonic() - asked)
        committed += size
    return committed / (time.monotonic() - started), p50(commits)


def run_transactions(cluster: LocalCluster, seconds: float, size: int) -> None:
    """Both producers twice, alternating, each once the brokers are quiet again: the idempotent arm
    writes gigabytes whose uploads and merges keep a 2-core machine busy for seconds after it, and
    a transactional arm measured straight after it paid for them (0.2x where 0.5x is its own)."""
    topic = f"txn-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic)
    pids = [b.process_id for b in cluster.brokers.values() if b.process_id is not None]
    for round_ in (1, 2):
        arms = ("idempotent", "transactional") if round_ == 1 else ("transactional", "idempotent")
        figures: dict[str, tuple[float, float]] = {}
        for arm in arms:
            waited = settle(pids)
            if arm == "idempotent":
                figures[arm] = (throughput(cluster.bootstrap, topic, seconds, idempotent=True), float("nan"))
            else:
                figures[arm] = transactional_throughput(cluster.bootstrap, topic, seconds, size)
            print(f"  ({arm} arm after {waited:.0f} s for the brokers to go quiet)")
        rate, commit = figures["transactional"]
        idempotent = figures["idempotent"][0]
        print(f"transactional produce, 3 brokers, {size} x 1 KiB per transaction: {rate:,.0f} msg/s "
              f"({rate / 1024:.1f} MiB/s), p50 commit {commit * 1000:.0f} ms")  # fmt: skip
        print(f"  idempotent producer, same run: {idempotent:,.0f} msg/s; ratio {rate / idempotent:.2f} "
              "(target >= 0.8)")  # fmt: skip


def settle(pids: list[int], busy: float = 0.3, most_s: float = 120) -> float:
    """Seconds until the brokers together use less than ``busy`` of a core over a second (at most
    ``most_s``)."""
    started = time.monotonic()
    while time.monotonic() - started < most_s:
        before = sum(cpu_seconds(pids).values())
        time.sleep(1)
        if sum(cpu_seconds(pids).values()) - before < busy:
            break
    return time.monotonic() - started


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def kill_leaders(cluster: LocalCluster, load: Load, topic: str, kills: int) -> list[list[float]]:
    """Kill -9 the leader of partition 0 ``kills`` times under ``load``; per kill, the seconds from
    the kill to the first acknowledged write of each partition it led (the broker is restarted
    after each)."""
    failovers: list[list[float]] = []
    for _ in range(kills):
        placed = leaders(cluster.bootstrap, topic)
        victim = placed[0]
        moved = [p for p, node in placed.items() if node == victim]
        node = cluster.brokers[victim]
        assert node.process is not None
        os.kill(node.process.pid, signal.SIGKILL)
        node.process.wait(10)
        node.process = None
        killed = time.monotonic()
        failovers.append([load.first_ack_after(p, killed) for p in moved])
        node.start()
        time.sleep(4)  # rejoin and rebalance before the next kill
    return failovers


def failover_on(wal: str, kills: int, rate: int) -> list[list[float]]:
    """The failover figures on a 3-broker cluster of its own on ``wal`` (``shared``: the WAL is
    taken over by a live broker before the partitions move; ``object``: nothing to take over)."""
    root = cluster_root(f"tabletopic-failover-{wal}-")
    cluster = LocalCluster(root, nodes=3, base_port=0, settings=SETTINGS, wal=wal)
    try:
        cluster.start()
        time.sleep(3)
        topic = f"failover-{uuid.uuid4().hex[:6]}"
        create_topic(cluster.bootstrap, topic)
        load = Load(cluster.bootstrap, topic, rate).start()
        time.sleep(2)
        try:
            return kill_leaders(cluster, load, topic, kills)
        finally:
            load.stop()
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def print_failover(wal: str, failovers: list[list[float]]) -> None:
    every = [t for kill in failovers for t in kill]
    worst = [max(kill) for kill in failovers if kill]
    slowest = max(worst, default=float("nan"))
    print(f"failover on the {wal} WAL, kill -9 -> first acknowledged write per moved partition "
          f"({len(failovers)} kills, {len(every)} partitions): p50 {p50(every):.2f} s")  # fmt: skip
    print(f"  every partition writable again (slowest of each kill): p50 {p50(worst):.2f} s, "
          f"max {slowest:.2f} s (target <= 5 s; AutoMQ: 9 s session timeout, then reassignment)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument(
        "--wal",
        action="append",
        choices=["shared", "object"],
        help="WAL kind(s) of the failover figures, repeatable (default both); the first is also the "
        "WAL of the throughput, transaction and reassignment figures",
    )
    parser.add_argument("--only-failover", action="store_true", help="only the failover per WAL kind")
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--balancer-repeats", type=int, default=3)
    parser.add_argument("--balancer-rate", type=int, default=3_000_000, help="bytes/s of the skewed load")
    parser.add_argument("--only-balancer", action="store_true")
    parser.add_argument("--txn-size", type=int, default=1000, help="messages per transaction")
    parser.add_argument("--only-transactions", action="store_true")
    parser.add_argument("--partitions", type=int, default=0, help="run the scale bench with N partitions")
    parser.add_argument("--topic-partitions", type=int, default=100, help="partitions per topic (scale)")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="idle CPU window (scale)")
    parser.add_argument(
        "--open-transactions",
        action="store_true",
        help="scale: leave a transaction open on every partition of the killed broker",
    )
    parser.add_argument(
        "--compaction-interval-ms", type=int, default=60_000, help="object compaction interval (scale)"
    )
    parser.add_argument("--only-write-path", action="store_true", help="the write path of each WAL kind")
    parser.add_argument(
        "--wal-kinds",
        default="local,object,shared",
        help="WAL kinds of the write path, comma-separated: local, local-s3, object, shared, object-1, "
        "shared-1",
    )
    parser.add_argument(
        "--linger-ms",
        type=float,
        default=None,
        help="the producer's linger.ms in the write path's fixed rate",
    )
    parser.add_argument(
        "--split-cores",
        action="store_true",
        help="write path: the brokers on CPU 0, everything else on CPU 1 (see bench/write_path.py)",
    )
    parser.add_argument(
        "--broker-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the write path's cluster brokers (repeatable)",
    )
    parser.add_argument(
        "--write-path-partitions",
        type=int,
        default=12,
        help="partitions of each write-path topic: at 1,200 the two clients part (see bench/write_path.py)",
    )
    args = parser.parse_args()
    if args.only_write_path:
        kinds = [k.strip() for k in args.wal_kinds.split(",") if k.strip()]
        extra = dict(kv.split("=", 1) for kv in args.broker_set)
        run_write_path(
            kinds,
            args.rate,
            args.seconds,
            extra,
            args.linger_ms,
            args.split_cores,
            partitions=args.write_path_partitions,
        )
        return
    args.wal = list(dict.fromkeys(args.wal or ["shared", "object"]))
    if args.only_failover:
        print("(a 2-core machine shared with other jobs: figures are noisy)")
        results = {wal: failover_on(wal, args.kills, args.rate) for wal in args.wal}
        print()
        for wal, kills in results.items():
            print_failover(wal, kills)
        return
    if args.partitions:
        run_scale(
            args.partitions,
            args.topic_partitions,
            args.idle_seconds,
            args.compaction_interval_ms,
            args.open_transactions,
        )
        return
    if args.only_transactions:
        root = cluster_root("tabletopic-cluster-bench-")
        cluster = LocalCluster(root, nodes=1, base_port=0, settings=SETTINGS)
        print("(a 2-core machine shared with other jobs: figures are noisy)")
        try:
            cluster.start()
            for n in (2, 3):
                cluster.add_broker(n)
            time.sleep(3)
            run_transactions(cluster, args.seconds, args.txn_size)
        finally:
            cluster.stop()
            shutil.rmtree(root, ignore_errors=True)
        return
    if args.balancer_repeats > 0:
        with test_cluster() as balancing:
            run_balancer(balancing, args.balancer_repeats, args.balancer_rate)
    if args.only_balancer:
        return
    root = cluster_root("tabletopic-cluster-bench-")
    cluster = LocalCluster(root, nodes=1, base_port=0, settings=SETTINGS, wal=args.wal[0])
    renew, session = SETTINGS["broker.heartbeat.interval.ms"], SETTINGS["broker.session.timeout.ms"]
    print(f"cluster under {root}; lease renewal {renew} ms, session timeout {session} ms")
    print("(a 2-core machine shared with other jobs: figures are noisy)")
    try:
        cluster.start()
        rates: dict[int, float] = {}
        for n in (1, 2, 3):
            if n > 1:
                cluster.add_broker(n)
                time.sleep(3)  # the controller balances partitions onto the new broker
            topic = f"tput-{n}-{uuid.uuid4().hex[:6]}"
            create_topic(cluster.bootstrap, topic)
            rates[n] = throughput(cluster.bootstrap, topic, args.seconds)
        run_transactions(cluster, args.seconds, args.txn_size)
        topic = f"failover-{uuid.uuid4().hex[:6]}"
        create_topic(cluster.bootstrap, topic)
        load = Load(cluster.bootstrap, topic, args.rate).start()
        time.sleep(2)
        failovers = {cluster.wal: kill_leaders(cluster, load, topic, args.kills)}
        moves: list[float] = []
        for _ in range(args.moves):
            placed = leaders(cluster.bootstrap, topic)
            target = next(n for n in sorted(cluster.brokers) if n != placed[0])
            asked = time.monotonic()
            call(
                cluster.bootstrap,
                45,
                0,
                timeout=30_000,
                topics=[{"name": topic, "partitions": [{"partition_index": 0, "replicas": [target]}]}],
            )
            while leaders(cluster.bootstrap, topic)[0] != target:
                time.sleep(0.01)
            moves.append(load.first_ack_after(0, asked))
            time.sleep(2)
        load.stop()
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    for wal in args.wal:
        if wal not in failovers:
            failovers[wal] = failover_on(wal, args.kills, args.rate)
    print()
    for wal, kills in failovers.items():
        print_failover(wal, kills)
    print(f"reassignment under load ({len(moves)} moves at {args.rate} msg/s): p50 {p50(moves):.2f} s, "
          f"max {max(moves, default=float('nan')):.2f} s   (AutoMQ: about 1.5 s)")  # fmt: skip
    for n, rate in rates.items():
        print(f"produce with {n} broker(s): {rate:,.0f} msg/s of 1 KiB ({rate / 1024:.1f} MiB/s), "
              f"ratio to 1 broker {rate / rates[1]:.2f}")  # fmt: skip
    if load.errors:
        print(f"producer errors: {len(load.errors)} (first: {load.errors[0]})")


@contextmanager
def test_cluster(
    nodes: int = 3, postgres: PostgresServer | None = None, extra: dict[str, str] | None = None
) -> Iterator[TestCluster]:
    """PostgreSQL (``postgres`` when given, started here), SeaweedFS and ``nodes`` brokers, all
    stopped on exit."""
    root = cluster_root("tabletopic-cluster-bench-")
    postgres = (postgres or PostgresServer()).start()
    seaweed = SeaweedFS(root / "s3").start()
    s3 = {
        "s3.endpoint": seaweed.endpoint,
        "s3.bucket": seaweed.bucket,
        "s3.region": "us-east-1",
        "s3.access.key": ACCESS_KEY,
        "s3.secret.key": SECRET_KEY,
        "s3.path.style": "true",
    }
    cluster = TestCluster(root, postgres.create_database("bench"), s3, extra or {})
    try:
        for node in range(1, nodes + 1):
            cluster.start(node)
        wait_until(lambda: len(cluster.metadata(1).brokers) == nodes, timeout=60)
        yield cluster
    finally:
        cluster.stop_all()
        seaweed.stop()
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)


def balancer_convergence(cluster: TestCluster, rate: int, partitions: int = 6) -> tuple[float, int]:
    """Seconds from the start of a skewed load until balanced, and the leadership moves made."""
    topic = f"skew-{uuid.uuid4().hex[:8]}"
    create_test_topic(cluster.brokers[1].bootstrap, topic, partitions)
    wait_placed(cluster, topic, partitions)
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


def run_balancer(cluster: TestCluster, repeats: int, rate: int) -> None:
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


# Scale ---------------------------------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds of each process (from /proc; gone processes are left out)."""
    tick = os.sysconf("SC_CLK_TCK")
    result = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        result[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return result


def process_tree(root: int) -> list[int]:
    """``root`` and every process descending from it (PostgreSQL: the postmaster and its backends)."""
    return [root, *descendants(root)]


def idle_cpu(groups: dict[str, int], seconds: float) -> dict[str, float]:
    """Share of one core each process tree used over ``seconds`` (a backend that started meanwhile
    counts from zero)."""
    before = {name: cpu_seconds(process_tree(root)) for name, root in groups.items()}
    started = time.monotonic()
    time.sleep(seconds)
    after = {name: cpu_seconds(process_tree(root)) for name, root in groups.items()}
    took = time.monotonic() - started
    return {
        name: sum(t - before[name].get(pid, 0.0) for pid, t in after[name].items()) / took for name in groups
    }


def metadata_seconds(bootstrap: str) -> float:
    """One Metadata (v12) for all topics, timed from the request to the answer's last byte."""
    sock = connect(bootstrap, timeout=60)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frame = encode_request(
            kafka_request(
                3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            ),
            1,
        )
        started = time.perf_counter()
        sock.sendall(frame)
        read_frame(sock)
        return time.perf_counter() - started
    finally:
        sock.close()


def opened_count(engine: Any) -> int:
    """Streams a leader holds (opened with an epoch): the partitions served."""
    with engine.connect() as conn:
        query = "SELECT count(*) FROM s3stream_streams WHERE owner IS NOT NULL AND state = 'open'"
        return int(conn.exec_driver_sql(query).scalar_one())


def placed_count(meta: ClusterMetadata, prefix: str) -> int:
    return sum(
        1 for (topic, _), row in meta.snapshot().partitions.items() if topic.startswith(prefix) and row.leader
    )


def idle(figures: list[tuple[str, str]], groups: dict[str, int], seconds: float, when: str) -> None:
    for name, share in idle_cpu(groups, seconds).items():
        target = "5" if name == "PostgreSQL" else "10"
        figures.append((f"idle CPU {name}, {when}", f"{share * 100:.1f} % of a core (target <= {target} %)"))
        print(figures[-1])


REBUILT = re.compile(r"producer state rebuilt in ([0-9.]+) s, transaction state in ([0-9.]+) s")


def leave_open(bootstrap: str, partitions: list[tuple[str, int]]) -> tuple[Producer, str]:
    """One transaction with a record in every one of ``partitions``, flushed and left open (its
    timeout outlasts the bench): a new leader of each must rebuild it from the log. The producer
    is returned to be kept: closing it could end the transaction."""
    txn = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "scale-open",
            "transaction.timeout.ms": 900_000,
            "linger.ms": 5,
            "queue.buffering.max.messages": max(100_000, 2 * len(partitions)),
        }
    )
    txn.init_transactions(60)
    txn.begin_transaction()
    for topic, p in partitions:
        txn.produce(topic, value=b"t" * 100, partition=p)
    left = txn.flush(300)
    return txn, f"{len(partitions) - left:,} of {len(partitions):,} partitions"


def rebuild_seconds(logs: dict[Path, int]) -> str:
    """What brokers logged, past the given length of each log, of rebuilding producer and
    transaction state before serving the partitions they gained: seconds per broker, summed
    over its rounds of gains."""
    per_broker = []
    for path, length in logs.items():
        with path.open("rb") as log:
            log.seek(length)
            found = REBUILT.findall(log.read().decode(errors="replace"))
        per_broker.append(sum(float(producers) + float(transactions) for producers, transactions in found))
    return ", ".join(f"{s:.2f} s" for s in per_broker)


def run_scale(
    partitions: int,
    per_topic: int,
    idle_seconds: float,
    compaction_ms: int = 60_000,
    open_transactions: bool = False,
) -> None:
    """See the module docstring (scale)."""
    topics = [f"scale-{i:05d}" for i in range((partitions + per_topic - 1) // per_topic)]
    counts = {t: min(per_topic, partitions - i * per_topic) for i, t in enumerate(topics)}
    figures: list[tuple[str, str]] = []
    postgres = PostgresServer()
    # The test cluster's settings, but object compaction at its default interval by default (the
    # tests' 3 s would merge the first writes' 10,000 small objects all through the idle windows).
    with test_cluster(3, postgres, {"s3stream.compaction.interval.ms": str(compaction_ms)}) as cluster:
        engine = database.create_engine(cluster.metadata_url)
        meta = ClusterMetadata(engine)
        bootstrap = cluster.bootstrap
        print(f"3 brokers up; creating {partitions:,} partitions in {len(topics)} topics")
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 120_000})
        started = time.monotonic()
        for i in range(0, len(topics), 20):
            batch = [NewTopic(t, num_partitions=counts[t], replication_factor=1) for t in topics[i : i + 20]]
            for future in admin.create_topics(batch, request_timeout=300).values():
                future.result(300)
        created = time.monotonic() - started
        wait_until(lambda: placed_count(meta, "scale-") >= partitions, timeout=600, interval=0.2)
        placed = time.monotonic() - started
        figures.append(("create: CreateTopics answered", f"{created:.1f} s ({partitions / created:,.0f}/s)"))
        figures.append(("create: all placed by the controller", f"{placed:.1f} s (target <= 20 s)"))
        print(f"created in {created:.1f} s, placed in {placed:.1f} s")

        postmaster = postgres.postmaster_pid()
        groups = {f"broker {n}": b.process.pid for n, b in sorted(cluster.running().items()) if b.process}
        groups["PostgreSQL"] = postmaster
        # Served: every partition's leader opened its stream (an owner recorded on each stream).
        wait_until(lambda: opened_count(engine) >= partitions, timeout=900, interval=0.5)
        served = time.monotonic() - started
        figures.append(("create: all served (streams opened by leaders)", f"{served:.1f} s"))
        print(figures[-1])
        time.sleep(3)
        idle(figures, groups, idle_seconds, "never written")

        acked: dict[tuple[str, int], float] = {}
        errors: list[str] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                acked[(msg.topic(), msg.partition())] = time.monotonic()
            else:
                errors.append(str(err))

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 300_000,
                "retry.backoff.ms": 50,
                "retry.backoff.max.ms": 500,
                "queue.buffering.max.messages": max(100_000, 2 * partitions),
            }
        )
        started = time.monotonic()
        for topic, count in counts.items():
            for p in range(count):
                producer.produce(topic, value=b"w" * 100, partition=p, on_delivery=delivered)
            producer.poll(0)
        producer.flush(600)
        wrote = time.monotonic() - started
        rate = len(acked) / wrote
        summary = (
            f"{wrote:.1f} s ({rate:,.0f} partitions/s, {len(acked):,} acknowledged, {len(errors)} errors)"
        )
        figures.append(("first write to every partition", summary))
        print(figures[-1])

        time.sleep(5)  # let the writes' uploads and the brokers settle
        idle(figures, groups, idle_seconds, "written once")
        for node in sorted(cluster.running()):
            times = [metadata_seconds(cluster.brokers[node].bootstrap) for _ in range(7)]
            low, high = min(times) * 1000, max(times) * 1000
            summary = f"{p50(times) * 1000:.0f} ms (min {low:.0f}, max {high:.0f}; target <= 100 ms)"
            figures.append((f"Metadata all topics via broker {node} (p50 of 7)", summary))
            print(figures[-1])

        snapshot = meta.snapshot()
        victim = next(n for n in sorted(cluster.running()) if n != snapshot.controller_id)
        led = [
            k for k, row in snapshot.partitions.items() if row.leader == victim and k[0].startswith("scale-")
        ]
        kept_open: Producer | None = None
        if open_transactions:
            kept_open, summary = leave_open(bootstrap, led)
            figures.append(("a transaction left open on its partitions", summary))
            print(figures[-1])
        acked.clear()
        errors.clear()
        logs = [cluster.brokers[n].data_dir / "broker.log" for n in cluster.running() if n != victim]
        survivor_logs = {path: path.stat().st_size for path in logs}
        process = cluster.brokers[victim].process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        cluster.brokers[victim].process = None
        killed = time.monotonic()
        for topic, p in led:
            producer.produce(topic, value=b"f" * 100, partition=p, on_delivery=delivered)
        producer.poll(0)

        def moved() -> bool:
            rows = meta.snapshot().partitions
            return not any(rows[k].leader == victim for k in led if k in rows)

        wait_until(moved, timeout=300, interval=0.1)
        replaced = time.monotonic() - killed
        producer.flush(300)
        waits = sorted(acked[k] - killed for k in led if k in acked)
        figures.append(
            (f"kill -9 of broker {victim}: its {len(led):,} partitions re-placed", f"{replaced:.1f} s")
        )
        figures.append(("  produce to each acknowledged again", f"p50 {p50(waits):.1f} s, last "
                        f"{max(waits, default=float('nan')):.1f} s ({len(waits):,} of {len(led):,}, "
                        f"{len(errors)} errors)"))  # fmt: skip
        print(figures[-2], figures[-1])
        rebuilt = rebuild_seconds(survivor_logs)
        figures.append(("  survivors' producer and transaction state rebuilt in", rebuilt))
        print(figures[-1])
        del kept_open
        engine.dispose()
    print()
    print(f"scale bench, {partitions:,} partitions on 3 brokers (shared 2-core machine: indicative);")
    print(f"  lease renewal 500 ms (a poll every 125 ms), session 3 s, compaction every {compaction_ms} ms")
    width = max(len(name) for name, _ in figures)
    for name, value in figures:
        print(f"  {name:<{width}}  {value}")


if __name__ == "__main__":
    main()
