"""Cluster figures on this machine (PostgreSQL + SeaweedFS + brokers on loopback, all on the same
cores): what a cluster of stateless brokers costs and how fast ownership moves.

- failover: a broker leading partition 0 is killed with SIGKILL under a steady idempotent acks=all
  producer; per moved partition, the time from the kill to its first acknowledged write afterwards
  (p50 over every moved partition, and p50/max over kills of the slowest partition of each kill);
- reassignment under load: AlterPartitionReassignments of one partition to another broker, time
  from the request to the first write acknowledged by the new leader (p50/max);
- produce throughput with 1, 2 and 3 brokers (one confluent-kafka producer, acks=all, 1 KiB), and
  the ratio to one broker.

AutoMQ's published figures for comparison: partition reassignment about 1.5 s; failover is bounded
by its broker session timeout (9 s by default) plus the reassignment.

Usage: python bench/cluster_bench.py [--kills 5] [--moves 5] [--seconds 5] [--rate 2000]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tabletopic.broker.wire_client import call  # noqa: E402
from tabletopic.cluster.local import LocalCluster  # noqa: E402

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
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "topic.metadata.refresh.interval.ms": 1000,
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 100,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
                "message.timeout.ms": 60_000,
            }
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


def throughput(bootstrap: str, topic: str, seconds: float) -> float:
    """Messages per second acknowledged by one producer writing as fast as it can (1 KiB)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20}
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


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rate", type=int, default=2000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tabletopic-cluster-bench-"))
    cluster = LocalCluster(root, nodes=1, base_port=0, settings=SETTINGS)
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
        failovers: list[list[float]] = []
        topic = f"failover-{uuid.uuid4().hex[:6]}"
        create_topic(cluster.bootstrap, topic)
        load = Load(cluster.bootstrap, topic, args.rate).start()
        time.sleep(2)
        for _ in range(args.kills):
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
    every = [t for kill in failovers for t in kill]
    worst = [max(kill) for kill in failovers if kill]
    print()
    slowest = max(worst, default=float("nan"))
    print(f"failover, kill -9 -> first acknowledged write per moved partition ({len(failovers)} kills, "
          f"{len(every)} partitions): p50 {p50(every):.2f} s")  # fmt: skip
    print(f"  slowest partition of each kill: p50 {p50(worst):.2f} s, max {slowest:.2f} s "
          "(AutoMQ: 9 s session timeout before reassignment)")  # fmt: skip
    print(f"reassignment under load ({len(moves)} moves at {args.rate} msg/s): p50 {p50(moves):.2f} s, "
          f"max {max(moves, default=float('nan')):.2f} s   (AutoMQ: about 1.5 s)")  # fmt: skip
    for n, rate in rates.items():
        print(f"produce with {n} broker(s): {rate:,.0f} msg/s of 1 KiB ({rate / 1024:.1f} MiB/s), "
              f"ratio to 1 broker {rate / rates[1]:.2f}")  # fmt: skip
    if load.errors:
        print(f"producer errors: {len(load.errors)} (first: {load.errors[0]})")


if __name__ == "__main__":
    main()
