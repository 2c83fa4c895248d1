"""A user's workload through random faults on a 3-broker cluster, judged as the user would judge it.

PostgreSQL + SeaweedFS + 3 brokers (racks a, b, c) on loopback, on the test cluster's settings
(the shared WAL, or ``--wal object`` at 20 ms; heartbeat 0.5 s, broker session timeout 3 s); a topic
of ``--partitions`` (12) and a 3-partition table topic, each written by an idempotent acks=all
producer at ``--rate`` records a second; a consumer group of two confluent-kafka members on the
topic (the classic protocol, or KIP-848's with ``--group-protocol consumer``). Every ``--every``
seconds (drawn from a range) one fault, chosen at random: SIGKILL of a broker or of the controller
(restarted 3 s later), SIGSTOP of a broker for 8 s, SIGTERM of a broker (restarted), SeaweedFS
paused for 5 s, PostgreSQL restarted, every connection to the brokers reset at once; and, only
when ``--faults`` names it, PostgreSQL frozen for 8 s (every process of the server SIGSTOPped, as a
stalled disk or a paused VM freezes it).
The run acts as the brokers' supervisor too: a broker that ended with exit code 75 (it left
the cluster: paused past its lease on the shared WAL, its WAL was taken over) is started again, as
systemd or Kubernetes would. Then the writing stops and the run reports:

- acknowledged records lost or duplicated (the whole topic read back by offset),
- whether the table holds every acknowledged record of the table topic exactly once,
- seconds from the end of the last fault until the consumer group had every acknowledged record and
  committed the end of every partition (the target: within 30 s); the writing stops 10 s after the
  last fault, so this is the group's own catch-up, not the run's length,
- per fault, the worst unavailability: the longest a partition went without an acknowledgement in a
  window around the fault (the target: <= 10 s),
- the partitions that went over 10 s without an acknowledgement, and those of them whose leader
  (Metadata read every second) never changed during the gap: a gap the leaders cannot explain,
  next to how far the writer fell behind its rate and how often librdkafka's queue was full,
- brokers that hung (did not answer Metadata within 10 s at the end),
- the acknowledgement latency before the first fault (what the workload alone costs), with
  librdkafka's account of where it went: waiting to be put in a request, in the send queue, and
  the brokers' round trip (``bench/producer_stats.py``).

Usage: python bench/fault_run.py [--seconds 300] [--rate 300] [--partitions 12] [--every 20-40] [--seed N]
       [--wal shared|object] [--group-protocol classic|consumer]
       [--faults "kill -9 controller,SIGTERM"] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from percentiles import nearest_rank  # noqa: E402
from producer_stats import ProducerStats  # noqa: E402

from tabletopic.config import EXIT_REJOIN  # noqa: E402
from tests.support.cluster import LocalCluster, wait_until  # noqa: E402
from tests.support.group_member import GroupMember, committed_offsets, read_by  # noqa: E402
from tests.support.kafka_clients import create_topic, failover_producer  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402
from tests.support.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedFS  # noqa: E402
from tests.support.table_node import DeliveryLog, table_configs, table_positions  # noqa: E402

TABLE_PARTITIONS = 3
RACKS = {1: "a", 2: "b", 3: "c"}
FAULTS = (
    "kill -9 broker",
    "kill -9 controller",
    "SIGSTOP 8 s",
    "SIGTERM",
    "S3 paused 5 s",
    "PostgreSQL restart",
    "connections reset",
)
# Faults a run draws only when --faults names them: adding one to FAULTS would change what every
# seed quoted so far draws.
NAMED_ONLY = ("PostgreSQL paused 8 s",)


class Writer:
    """An idempotent acks=all producer at ``rate`` records a second, keeping each partition's
    acknowledgement times (unavailability) and every acknowledged (partition, offset)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int) -> None:
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.log = DeliveryLog()
        self.acked_at: dict[int, list[float]] = {p: [] for p in range(partitions)}
        # (when, seconds from produce() to the acknowledgement) of every acknowledged record.
        self.latencies: list[tuple[float, float]] = []
        # How far the writer itself fell behind its rate, and how often librdkafka's queue was
        # full: a partition's gap is the cluster's only if the writer kept sending to it.
        self.most_behind_s = 0.0
        self.queue_full = 0
        # librdkafka's own split of the acknowledgement time (queue, send buffer, round trip).
        self.stats = ProducerStats()
        self._stop = threading.Event()
        # Brokers killed on purpose: their refused connections are no news (log_level 2).
        # FAULT_RUN_PRODUCER_DEBUG=eos,msg: librdkafka's own account of sequences, epochs and acks
        # (to stderr), for tracing a record it reported delivered.
        debug = os.environ.get("FAULT_RUN_PRODUCER_DEBUG")
        extra: dict[str, Any] = {"debug": debug, "log_level": 7} if debug else {"log_level": 2}
        self._producer = Producer(
            failover_producer(
                bootstrap,
                {
                    "message.timeout.ms": 300_000,
                    "retry.backoff.max.ms": 500,
                    **self.stats.settings(),
                    **extra,
                },
            )
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.began = time.monotonic()  # the rate is kept from here
        self._thread.start()

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        self.log.callback(msg.value())(err, msg)
        if err is None:
            now = time.monotonic()
            self.acked_at[msg.partition()].append(now)
            self.latencies.append((now, msg.latency() or 0.0))

    def _run(self) -> None:
        sent, started = 0, self.began
        while not self._stop.is_set():
            while sent < int((time.monotonic() - started) * self.rate):
                behind = time.monotonic() - started - sent / self.rate
                self.most_behind_s = max(self.most_behind_s, behind)
                value = f"{self.topic}-{sent}".encode()
                key = str(sent).encode()
                try:
                    self._producer.produce(
                        self.topic, value, key, partition=sent % self.partitions, on_delivery=self._delivered
                    )
                except BufferError:  # librdkafka's queue is full while partitions move: wait, as users do
                    self.queue_full += 1
                    self._producer.poll(0.1)
                    continue
                sent += 1
            self._producer.poll(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        left = self._producer.flush(300)
        if left:
            self.log.errors.append(f"{left} records never acknowledged")


class LeaderWatch:
    """Each partition's leader as Metadata reports it, read every second: the report tells the
    partitions whose leader changed during a long gap from those whose leader stayed, whose gap
    the brokers that moved leaders cannot explain."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.cluster, self.topic = cluster, topic
        self.changed_at: dict[int, list[float]] = {}  # partition -> when a new leader was first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="leader-watch")
        self._thread.start()

    def _run(self) -> None:
        last: dict[int, int] = {}
        while not self._stop.wait(1.0):
            leaders = self._ask()
            now = time.monotonic()
            for partition, (leader, _) in leaders.items():
                if last.get(partition, leader) != leader:
                    self.changed_at.setdefault(partition, []).append(now)
                last[partition] = leader

    def _ask(self) -> dict[int, tuple[int, int]]:
        """The leaders as the first broker that answers reports them (none answering: no news)."""
        try:
            nodes = list(self.cluster.running())
        except RuntimeError:  # the fault thread changed the brokers meanwhile
            return {}
        for node in nodes:
            try:
                return self.cluster.leaders(self.topic, via=node)
            except (OSError, EOFError, ValueError):
                continue  # killed meanwhile: ask another broker
        return {}

    def changed(self, partition: int, start: float, end: float) -> bool:
        """Whether a new leader was seen from ``start`` to a second after ``end`` (one sample)."""
        return any(start <= at <= end + 1.0 for at in self.changed_at.get(partition, ()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@dataclass
class Group:
    """Two confluent-kafka members of one group, consuming from threads (``protocol``: librdkafka's
    ``group.protocol``, classic or KIP-848's consumer)."""

    bootstrap: str
    topic: str
    partitions: int
    protocol: str = "classic"
    group_id: str = field(default_factory=lambda: f"fault-run-{uuid.uuid4().hex[:6]}")
    members: list[GroupMember] = field(default_factory=list)

    def start(self) -> Group:
        settings = {"topic.metadata.refresh.interval.ms": 1000, "group.protocol": self.protocol}
        self.members = [GroupMember(self.bootstrap, self.topic, self.group_id, settings) for _ in range(2)]
        for member in self.members:
            member.start()
        return self

    def seen(self) -> set[bytes]:
        """Every value the members read."""
        return set(read_by(self.members))

    def committed_at_end(self, ends: dict[int, int]) -> bool:
        """Whether the group committed ``ends`` (the acknowledged end of every partition): one
        OffsetFetch. The high watermarks, one ListOffsets per partition, took longer than the
        report's wait at 1,200 partitions."""
        committed = committed_offsets(self.bootstrap, self.group_id, self.topic, range(self.partitions))
        return all(max(offset, 0) == ends.get(p, 0) for p, offset in committed.items())

    def stop(self) -> None:
        for member in self.members:
            member.stop()


def read_back(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[bytes, set[tuple[int, int]]]:
    """Every value read, with the (partition, offset) places it was read at, reading each partition
    up to ``ends``. A value at two places was written twice; one place read twice is the read's."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "read-back", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    places: dict[bytes, set[tuple[int, int]]] = {}
    reached = dict.fromkeys(ends, 0)
    errors: Counter[str] = Counter()
    deadline = time.monotonic() + 120 + len(ends) / 10
    try:
        while time.monotonic() < deadline and any(reached[p] < end for p, end in ends.items()):
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    places.setdefault(msg.value() or b"", set()).add((msg.partition(), msg.offset()))
                    reached[msg.partition()] = max(reached[msg.partition()], msg.offset() + 1)
                else:
                    errors[f"partition {msg.partition()}: {msg.error()}"] += 1
        for p, end in sorted(ends.items()):
            if reached[p] < end:  # say what a partition that could not be read answers
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                    log = f"log {low} to {high}"
                except KafkaException as exc:
                    log = f"its offsets unknown: {exc}"
                print(f"  read back: partition {p} read to {reached[p]} of {end} ({log})")
        for error, count in errors.most_common(10):
            print(f"  read back: {error} ({count}x)")
    finally:
        consumer.close()
    return places


def apply_fault(
    kind: str, cluster: LocalCluster, postgres: PostgresServer, s3: SeaweedFS, rng: random.Random
) -> None:
    """Apply one fault and undo it (restart, resume) before returning."""
    running = sorted(cluster.running())
    if kind == "kill -9 controller":
        node = cluster.metadata(running[0]).controller_id
        node = node if node in running else rng.choice(running)
    else:
        node = rng.choice(running)
    if kind in ("kill -9 broker", "kill -9 controller"):
        cluster.brokers[node].kill()
        time.sleep(3)
        cluster.start(node, RACKS[node])
    elif kind == "SIGSTOP 8 s":
        process = cluster.brokers[node].process
        assert process is not None
        os.kill(process.pid, signal.SIGSTOP)
        time.sleep(8)
        os.kill(process.pid, signal.SIGCONT)
        try:  # deposed on the shared WAL, it ends by itself within seconds of waking up
            process.wait(20)
        except subprocess.TimeoutExpired:
            pass
        supervise(cluster)
    elif kind == "SIGTERM":
        cluster.brokers[node].stop()
        cluster.start(node, RACKS[node])
    elif kind == "S3 paused 5 s":
        assert s3.process is not None
        os.kill(s3.process.pid, signal.SIGSTOP)
        time.sleep(5)
        os.kill(s3.process.pid, signal.SIGCONT)
    elif kind == "PostgreSQL restart":
        postgres.restart()
    elif kind == "PostgreSQL paused 8 s":
        frozen = postgres.pause()
        time.sleep(8)
        postgres.resume(frozen)
        time.sleep(5)  # a broker deposed meanwhile leaves (EXIT_REJOIN) within seconds of it
        supervise(cluster)
    elif kind == "connections reset":
        print(f"         {cluster.reset_connections()} connections reset", flush=True)


def supervise(cluster: LocalCluster) -> None:
    """Start again every broker that ended with EXIT_REJOIN, as a supervisor restarting failed
    processes would (any other exit is a finding, left for the report)."""
    for node_id, broker in cluster.brokers.items():
        process = broker.process
        if process is None or process.poll() is None:
            continue
        if process.returncode == EXIT_REJOIN:
            print(
                f"         broker {node_id} left the cluster (exit {EXIT_REJOIN}); starting it again",
                flush=True,
            )
            broker.process = None
            cluster.start(node_id, RACKS[node_id])
        else:
            print(f"         broker {node_id} exited with code {process.returncode}", flush=True)


def worst_gap(times: Mapping[int, list[float]], start: float, end: float) -> tuple[float, int, float]:
    """The longest any series of ``times`` (sorted instants by key: a partition's acknowledgements,
    a member's reads) went between two instants, among gaps overlapping ``[start, end]``: its
    length, the key and when it began."""
    worst = (0.0, -1, start)
    for key, series in times.items():
        for before, after in itertools.pairwise(series):
            if after >= start and before <= end and after - before > worst[0]:
                worst = (after - before, key, before)
    return worst


def over_target(writer: Writer, target: float) -> list[tuple[float, int, float]]:
    """Every partition's longest gap between acknowledgements, where it is over ``target``
    seconds: ``(gap, partition, when it began)``, longest first."""
    worst = []
    for partition, times in writer.acked_at.items():
        gaps = [(after - before, partition, before) for before, after in itertools.pairwise(times)]
        longest = max(gaps, default=(0.0, partition, 0.0))
        if longest[0] > target:
            worst.append(longest)
    return sorted(worst, reverse=True)


@dataclass
class FaultRun:
    """A run's settings from the command line (:func:`fault_arguments`) and, inside
    :meth:`rig`, its cluster: PostgreSQL, SeaweedFS and three brokers, all under one directory."""

    args: argparse.Namespace
    kinds: list[str]
    seed: int
    rng: random.Random
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fault-run-")))
    clean: bool = False  # set by the run's verdict: an unclean run keeps its data to look into

    @contextlib.contextmanager
    def rig(self, database: str) -> Iterator[tuple[LocalCluster, PostgresServer, SeaweedFS]]:
        postgres = PostgresServer(keep=True).start()  # its own directory, which the postgres user can reach
        s3 = SeaweedFS(self.root / "s3").start()
        s3_settings = {
            "s3.endpoint": s3.endpoint, "s3.bucket": s3.bucket, "s3.region": "us-east-1",
            "s3.access.key": ACCESS_KEY, "s3.secret.key": SECRET_KEY, "s3.path.style": "true",
        }  # fmt: skip
        url = postgres.create_database(database)
        # Idle connections closed after 30 s (Kafka's default is 10 min): the close is what frees a
        # librdkafka producer blocked in send_offsets_to_transaction on a group coordinator that
        # left the cluster (librdkafka issues 5456 and 5511), within one fault's gap.
        idle = {"connections.max.idle.ms": "30000"}
        cluster = LocalCluster(self.root / "cluster", url, s3_settings, idle, wal=self.args.wal)
        print(f"seed {self.seed}; {self.args.wal} WAL; data under {self.root}")
        try:
            cluster.start_many([1, 2, 3], RACKS)
            wait_until(lambda: len(cluster.metadata(1).brokers) == 3, timeout=60)
            yield cluster, postgres, s3
        finally:
            cluster.stop_all()
            s3.stop()
            postgres.keep = self.args.keep or not self.clean
            postgres.stop()
        # A run's data is about 1 GB: kept only when it has something to show (or --keep).
        if self.clean and not self.args.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            print(f"the cluster's data and logs are kept under {self.root}")
            print(f"its metadata database's files under {postgres.directory}")

    def faults(
        self, cluster: LocalCluster, postgres: PostgresServer, s3: SeaweedFS
    ) -> list[tuple[str, float, float]]:
        """One fault every ``--every`` seconds for ``--seconds``, then 10 s of writing on (the last
        fault's unavailability window); each fault's kind, start and end."""
        low, high = (float(x) for x in self.args.every.split("-"))
        faults: list[tuple[str, float, float]] = []
        began = time.monotonic()
        time.sleep(self.rng.uniform(low, high) / 2)
        while time.monotonic() - began < self.args.seconds:
            supervise(cluster)
            kind = self.rng.choice(self.kinds)
            start = time.monotonic()
            print(f"{start - began:6.1f} s  {kind}", flush=True)
            apply_fault(kind, cluster, postgres, s3, self.rng)
            faults.append((kind, start, time.monotonic()))
            gap = self.rng.uniform(low, high)
            if time.monotonic() + gap - began >= self.args.seconds:
                time.sleep(10)
                break
            time.sleep(gap)
        supervise(cluster)
        return faults


def fault_arguments(parser: argparse.ArgumentParser) -> FaultRun:
    """Add the options every fault run takes, parse the command line, and check the faults named."""
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--every", default="20-40", help="seconds between faults, a range")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--wal", choices=("shared", "object"), default="shared")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs of a clean run too")
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"the faults to choose from, comma-separated (default: all of them but {', '.join(NAMED_ONLY)})",
    )
    args = parser.parse_args()
    kinds = [k.strip() for k in args.faults.split(",") if k.strip()]
    if unknown := [k for k in kinds if k not in FAULTS + NAMED_ONLY]:
        parser.error(f"unknown faults {unknown}; choose from {', '.join(FAULTS + NAMED_ONLY)}")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    return FaultRun(args, kinds, seed, random.Random(seed))


def answers(cluster: LocalCluster, node: int) -> bool:
    """Whether broker ``node`` answers Metadata (a broker that does not has hung)."""
    try:
        cluster.metadata(node)
        return True
    except Exception:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=12, help="partitions of the plain topic")
    parser.add_argument(
        "--group-protocol", choices=("classic", "consumer"), default="classic", help="the group's protocol"
    )
    run = fault_arguments(parser)
    with run.rig("faults") as (cluster, postgres, s3):
        topic, table_topic = "orders", "orders-table"
        create_topic(cluster.bootstrap, topic, run.args.partitions)
        create_topic(
            cluster.bootstrap, table_topic, TABLE_PARTITIONS, table_configs(commit_interval_ms="2000")
        )
        shapes = ((topic, run.args.partitions), (table_topic, TABLE_PARTITIONS))
        writers = [Writer(cluster.bootstrap, t, n, run.args.rate) for t, n in shapes]
        group = Group(cluster.bootstrap, topic, run.args.partitions, run.args.group_protocol).start()
        leaders = LeaderWatch(cluster, topic)
        faults = run.faults(cluster, postgres, s3)
        last_fault_end = faults[-1][2] if faults else time.monotonic()
        for writer in writers:
            writer.stop()
        leaders.stop()
        run.clean = report(cluster, writers, group, leaders, faults, last_fault_end)


def report(
    cluster: LocalCluster,
    writers: list[Writer],
    group: Group,
    leaders: LeaderWatch,
    faults: list[tuple[str, float, float]],
    last: float,
) -> bool:
    """Print the verdict; returns whether the user would have seen nothing wrong."""
    main_writer, table_writer = writers
    log = main_writer.log
    values = {log.values[pos] for pos in log.acked} | {value for _, value in log.unplaced}
    try:
        wait_until(lambda: values <= group.seen(), timeout=120, interval=0.5)
        wait_until(lambda: group.committed_at_end(log.end_offsets()), timeout=60, interval=1)
        caught_up = f"{time.monotonic() - last:.1f} s"
    except TimeoutError:
        caught_up = f"never (missing {len(values - group.seen())} of {len(values)})"
    group.stop()
    places = read_back(cluster.bootstrap, main_writer.topic, log.end_offsets())
    found = {place for at in places.values() for place in at}
    # Records librdkafka acknowledged without an offset are looked for by value (each is unique).
    lost = len(log.acked - found) + sum(1 for _, value in log.unplaced if value not in places)
    twice = {value: sorted(at) for value, at in places.items() if len(at) > 1}
    duplicated = len(twice)
    table = table_verdict(cluster, table_writer)
    hung = [n for n in cluster.running() if not answers(cluster, n)]
    unplaced = len(log.unplaced) + len(table_writer.log.unplaced)
    print()
    print(f"acknowledged {len(main_writer.log.acked) + len(table_writer.log.acked) + unplaced} records, "
          f"producer errors {len(main_writer.log.errors) + len(table_writer.log.errors)}")  # fmt: skip
    note = f"; {unplaced} acknowledged without an offset (looked for by value)" if unplaced else ""
    print(f"lost {lost}, duplicated {duplicated}; table: {table}{note}")
    missing = [(f"{p}@{o}", log.values[(p, o)]) for p, o in sorted(log.acked - found)]
    missing += [(f"{p}@?", value) for p, value in log.unplaced if value not in places]
    for value, at in list(twice.items())[:20]:  # each place as partition@offset
        print(f"  duplicated: {value!r} at {', '.join(f'{p}@{o}' for p, o in at)}")
    for where, value in missing[:20]:  # partition@offset as acknowledged (? without an offset)
        print(f"  lost: {where} {value!r}")
    print(f"consumer group caught up and committed {caught_up} after the last fault (target <= 30 s)")
    print(f"brokers hung: {hung or 'none'}")
    before_faults = faults[0][1] if faults else time.monotonic()
    print(steady_latency(main_writer, before_faults))
    print("  " + main_writer.stats.account(main_writer.began + 10, before_faults))
    print(f"\n{'fault':<20} {'at s':>7} {'worst partition gap s':>22}  partition, gap from s")
    first = faults[0][1] if faults else 0.0
    gaps = []
    for kind, start, end in faults:
        gap, partition, began = worst_gap(main_writer.acked_at, start, end + 10)
        gaps.append(gap)
        print(f"{kind:<20} {start - first:7.1f} {gap:22.2f}  {partition}, {began - first:.1f}")
    if gaps:
        print(f"worst unavailability per fault: max {max(gaps):.2f} s (target <= 10 s)")
        long_gaps = over_target(main_writer, 10.0)
        kept = [(g, p, b) for g, p, b in long_gaps if not leaders.changed(p, b, b + g)]
        for label, listed in (
            ("partitions that went over 10 s without an acknowledgement", long_gaps),
            ("  of which kept their leader throughout the gap", kept),
        ):
            shown = ", ".join(f"{p} ({g:.0f} s from {b - first:.1f})" for g, p, b in listed[:8])
            print(f"{label}: {len(listed)}  {shown}")
        print(f"the writer fell at most {main_writer.most_behind_s:.1f} s behind its rate; librdkafka's "
              f"queue was full {main_writer.queue_full} times")  # fmt: skip
    return not lost and not duplicated and table == "exact" and not caught_up.startswith("never") and not hung


def steady_latency(writer: Writer, until: float) -> str:
    """The writer's acknowledgement latency from 10 s after it began until ``until`` (the first
    fault): what the workload costs the cluster before anything fails."""
    took = [seconds for at, seconds in writer.latencies if writer.began + 10 <= at < until]
    if not took:
        return "acknowledgement latency before the first fault: no records"
    p50, p99, most = (nearest_rank(took, q) * 1000 for q in (0.5, 0.99, 1.0))
    return (
        f"acknowledgement latency before the first fault: p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
        f"max {most:.0f} ms over {len(took)} records"
    )


def table_verdict(cluster: LocalCluster, writer: Writer) -> str:
    from pyiceberg.catalog import load_catalog

    from tabletopic.table.commit import committed_state
    from tabletopic.table.table_config import sanitize_table_name

    node = next(iter(cluster.running()))
    catalog = load_catalog("fault-run", type="rest", uri=cluster.catalog_url(node))
    table = catalog.load_table(f"default.{sanitize_table_name(writer.topic)}")
    ends = writer.log.end_offsets()
    try:
        wait_until(
            lambda: all(
                dict(committed_state(table.refresh()).offsets).get(p, 0) >= e for p, e in ends.items()
            ),
            timeout=120,
            interval=1,
        )
    except TimeoutError:
        return "commits did not reach the acknowledged end within 120 s"
    positions = Counter(table_positions(table.refresh().scan().to_arrow().to_pylist()))
    missing = writer.log.acked - set(positions)
    duplicated = sum(1 for n in positions.values() if n > 1)
    if not missing and not duplicated:
        return "exact"
    return f"missing {len(missing)}, duplicated {duplicated} ({_where(cluster, writer, missing)})"


def _where(cluster: LocalCluster, writer: Writer, missing: set[tuple[int, int]]) -> str:
    """Where the table's missing records are: their positions, and what the topic holds there (the
    acknowledged record, another one, or nothing), to tell a table fault from a log fault."""
    if not missing:
        return "no record missing"
    firsts = {p: min(o for q, o in missing if q == p) for p, _ in missing}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "where"})
    consumer.assign([TopicPartition(writer.topic, p, first) for p, first in firsts.items()])
    held: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and not missing <= set(held):
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    held[(msg.partition(), msg.offset())] = msg.value() or b""
    finally:
        consumer.close()
    same = sum(1 for pos in missing if held.get(pos) == writer.log.values[pos])
    other = sum(1 for pos in missing if pos in held and held[pos] != writer.log.values[pos])
    sample = sorted(missing)[:8]
    return (
        f"first {sample}; the topic holds the acknowledged record at {same}, another record at {other}, "
        f"nothing at {len(missing) - same - other}; {len(writer.log.collisions)} collisions"
    )


if __name__ == "__main__":
    main()
