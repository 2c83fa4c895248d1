"""How long each client library's application waits over a broker's kill -9: kafka-python beside
librdkafka (confluent-kafka), in one run, through the same kills.

On a 3-broker cluster (PostgreSQL, SeaweedFS, the fault run's settings), each library gets a topic
of ``--partitions`` partitions, an idempotent acks=all producer writing ``--rate`` records a second
to every partition, and a consumer group of two members committing every 500 ms. Both groups are
coordinated by the same broker. Each round kills that broker with kill -9 (it leads a third of
every topic's partitions and coordinates both groups), starts it again ``--down`` seconds later and
lets ``--settle`` seconds pass; the next round kills the groups' coordinator again, wherever it is
by then.

The report, per library: records acknowledged and those its group never read (must be 0); the
longest any partition went without an acknowledgement (the producer's gap) and without a record
reaching a member (the consumer's gap) over the kills; and both gaps as a ratio of librdkafka's.
A broker's lease is 3 s: no client can do better than that on the killed broker's partitions.

``--listener sasl`` runs every client over the brokers' SASL_PLAINTEXT listener (PLAIN): a login on
every reconnect. ``--kafka-python-backoff-max-ms`` sets kafka-python's ``reconnect_backoff_max_ms``
(30 s by default): kafka-python asks for metadata again only after each failed reconnect to the
dead leader, and those attempts back off exponentially, so the cap bounds how long after the
partition moved it learns of it (docs/cluster.md, "What a client waits").

Usage: python bench/client_failover.py [--rounds 3] [--partitions 6] [--rate 60] [--down 10]
       [--settle 15] [--listener plaintext|sasl] [--kafka-python-backoff-max-ms N]
       [--keep]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fault_run import RACKS, FaultRun, worst_gap  # noqa: E402

from tests.support.cluster import LocalCluster, find_coordinator, wait_until  # noqa: E402
from tests.support.kafka_clients import create_topic  # noqa: E402

GROUP_KEY = 0  # FindCoordinator's key type of a group
SASL = {"user": "alice", "password": "alice-secret"}  # a user every test broker has


@dataclass
class Timeline:
    """When each partition's records were acknowledged and received, and which values were."""

    partitions: int
    acked_at: dict[int, list[float]] = field(default_factory=dict)
    read_at: dict[int, list[float]] = field(default_factory=dict)
    acked: set[bytes] = field(default_factory=set)
    read: set[bytes] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, partition: int, value: bytes) -> None:
        with self.lock:
            self.acked_at.setdefault(partition, []).append(time.monotonic())
            self.acked.add(value)

    def receive(self, partition: int, values: list[bytes]) -> None:
        with self.lock:
            self.read_at.setdefault(partition, []).extend(time.monotonic() for _ in values)
            self.read.update(values)


def worst_gap_in(times: dict[int, list[float]], windows: list[tuple[float, float]]) -> float:
    """The longest any partition went between two events, among gaps that overlap a kill window."""
    return max((worst_gap(times, start, end)[0] for start, end in windows), default=0.0)


class Library:
    """One client library's producer and group members, each in a thread of its own."""

    name = ""

    def __init__(
        self, bootstrap: list[str], secured: bool, topic: str, group: str, timeline: Timeline
    ) -> None:
        self.bootstrap, self.secured, self.topic, self.group = bootstrap, secured, topic, group
        self.timeline = timeline
        self.writing = threading.Event()  # set: the producer flushes and ends
        self.stop = threading.Event()  # set: the members leave the group
        self.threads: list[threading.Thread] = []

    def start(self, rate: int, members: int = 2) -> None:
        self.threads = [threading.Thread(target=self.produce, args=(rate,), daemon=True)]
        self.threads += [threading.Thread(target=self.consume, daemon=True) for _ in range(members)]
        for thread in self.threads:
            thread.start()

    def paced(self, rate: int, send: Callable[[int, bytes], None], serve: Callable[[], None]) -> None:
        """Send to every partition in turn at ``rate`` records a second until stopped."""
        started = time.monotonic()
        for sent in itertools.count():
            if self.writing.is_set():
                return
            while sent > (time.monotonic() - started) * rate and not self.writing.is_set():
                serve()
            send(sent % self.timeline.partitions, f"{self.name}-{sent}".encode())

    def stop_writing(self) -> None:
        self.writing.set()
        self.threads[0].join(60)

    def finish(self) -> None:
        """Give the group up to 60 s to read what was acknowledged, then stop its members."""
        try:
            wait_until(lambda: self.timeline.acked <= self.timeline.read, timeout=60, interval=0.5)
        except TimeoutError:
            pass  # the report counts what the group never read
        self.stop.set()
        for thread in self.threads[1:]:
            thread.join(60)

    def produce(self, rate: int) -> None:
        raise NotImplementedError

    def consume(self) -> None:
        raise NotImplementedError


class Librdkafka(Library):
    name = "librdkafka"

    def settings(self) -> dict[str, Any]:
        login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
        login |= {"sasl.username": SASL["user"], "sasl.password": SASL["password"]}
        return {
            "bootstrap.servers": ",".join(self.bootstrap),
            "log_level": 2,
            **(login if self.secured else {}),
        }

    def produce(self, rate: int) -> None:
        from confluent_kafka import Producer

        producer = Producer({**self.settings(), "enable.idempotence": True, "linger.ms": 5})

        def send(partition: int, value: bytes) -> None:
            def delivered(err: Any, msg: Any) -> None:
                if err is None:
                    self.timeline.ack(msg.partition(), msg.value())

            producer.produce(self.topic, value, partition=partition, on_delivery=delivered)

        self.paced(rate, send, lambda: producer.poll(0.005))
        producer.flush(60)

    def consume(self) -> None:
        from confluent_kafka import Consumer

        settings = {"group.id": self.group, "auto.offset.reset": "earliest", "auto.commit.interval.ms": 500}
        consumer = Consumer({**self.settings(), **settings})
        consumer.subscribe([self.topic])
        while not self.stop.is_set():
            by_partition: dict[int, list[bytes]] = {}
            for message in consumer.consume(200, 0.2):
                if message.error() is None:
                    by_partition.setdefault(message.partition(), []).append(message.value())
            for partition, values in by_partition.items():
                self.timeline.receive(partition, values)
        consumer.close()


class KafkaPython(Library):
    name = "kafka-python"

    backoff_max_ms: int | None = None  # reconnect_backoff_max_ms, when the run sets it

    def settings(self) -> dict[str, Any]:
        login = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}
        login |= {"sasl_plain_username": SASL["user"], "sasl_plain_password": SASL["password"]}
        backoff = {} if self.backoff_max_ms is None else {"reconnect_backoff_max_ms": self.backoff_max_ms}
        return {"bootstrap_servers": self.bootstrap, **(login if self.secured else {}), **backoff}

    def produce(self, rate: int) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(**self.settings(), acks="all", enable_idempotence=True, linger_ms=5)

        def send(partition: int, value: bytes) -> None:
            future = producer.send(self.topic, value=value, partition=partition)
            future.add_callback(lambda metadata: self.timeline.ack(metadata.partition, value))

        self.paced(rate, send, lambda: time.sleep(0.005))
        producer.flush(60)
        producer.close()

    def consume(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            self.topic,
            **self.settings(),
            group_id=self.group,
            auto_offset_reset="earliest",
            auto_commit_interval_ms=500,
        )
        while not self.stop.is_set():
            for partition, records in consumer.poll(200).items():
                self.timeline.receive(partition.partition, [r.value for r in records])
        consumer.close()


def groups_on_one_coordinator(cluster: LocalCluster, names: list[str]) -> dict[str, str]:
    """A group id per library, all coordinated by one broker (so one kill meets every group)."""
    while True:
        ids = {name: f"{name}-{uuid.uuid4().hex[:6]}" for name in names}
        if len({find_coordinator(cluster, 1, g, GROUP_KEY) for g in ids.values()}) == 1:
            return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rate", type=int, default=60, help="records a second, each library")
    parser.add_argument("--down", type=float, default=10, help="seconds the killed broker stays dead")
    parser.add_argument("--settle", type=float, default=15, help="seconds after its restart")
    parser.add_argument("--listener", choices=("plaintext", "sasl"), default="plaintext")
    parser.add_argument(
        "--kafka-python-backoff-max-ms", type=int, help="kafka-python's reconnect_backoff_max_ms"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data and logs")
    args = parser.parse_args()
    args.wal = "shared"
    KafkaPython.backoff_max_ms = args.kafka_python_backoff_max_ms
    run = FaultRun(args, [], 0, random.Random(0))
    kinds: list[type[Library]] = [Librdkafka, KafkaPython]
    with run.rig("client_failover") as (cluster, _postgres, _s3):
        secured = args.listener == "sasl"
        running = cluster.running().values()
        bootstrap = [f"127.0.0.1:{b.sasl_port}" if secured else b.bootstrap for b in running]
        groups = groups_on_one_coordinator(cluster, [kind.name for kind in kinds])
        libraries: list[Library] = []
        for kind in kinds:
            topic = f"failover-{kind.name}"
            create_topic(cluster.bootstrap, topic, args.partitions)
            library = kind(bootstrap, secured, topic, groups[kind.name], Timeline(args.partitions))
            library.start(args.rate)
            libraries.append(library)
        wait_until(
            lambda: all(len(lib.timeline.read_at) == args.partitions for lib in libraries), timeout=120
        )
        windows: list[tuple[float, float]] = []
        for round_ in range(args.rounds):
            time.sleep(3)
            victim = find_coordinator(
                cluster, next(iter(cluster.running())), groups[kinds[0].name], GROUP_KEY
            )
            print(f"round {round_ + 1}: kill -9 of broker {victim}, the groups' coordinator", flush=True)
            killed = time.monotonic()
            cluster.brokers[victim].kill()
            time.sleep(args.down)
            cluster.start(victim, RACKS[victim])
            time.sleep(args.settle)
            windows.append((killed, time.monotonic()))
        for library in libraries:
            library.stop_writing()
        for library in libraries:
            library.finish()
        run.clean = True
    report(libraries, windows, args)


def report(libraries: list[Library], windows: list[tuple[float, float]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.rounds} kills of the groups' coordinator, down {args.down:.0f} s each; "
        f"{args.partitions} partitions and {args.rate} records/s a library; {args.listener} listener; "
        f"kafka-python's reconnect_backoff_max_ms {args.kafka_python_backoff_max_ms or 'default'}"
    )
    print(
        f"{'library':<13} {'acked':>7} {'unread':>7} {'producer gap':>13} {'consumer gap':>13} {'ratio':>12}"
    )
    base = libraries[0].timeline
    base_gaps = worst_gap_in(base.acked_at, windows), worst_gap_in(base.read_at, windows)
    for library in libraries:
        timeline = library.timeline
        gaps = worst_gap_in(timeline.acked_at, windows), worst_gap_in(timeline.read_at, windows)
        ratio = "/".join(f"{gap / max(b, 1e-9):.2f}" for gap, b in zip(gaps, base_gaps, strict=True))
        unread = len(timeline.acked - timeline.read)
        print(
            f"{library.name:<13} {len(timeline.acked):>7,} {unread:>7,} "
            f"{gaps[0]:>11.2f} s {gaps[1]:>11.2f} s {ratio:>12}"
        )


if __name__ == "__main__":
    main()
