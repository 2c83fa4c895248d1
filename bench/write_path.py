"""The write path of each WAL kind, for ``bench/cluster_bench.py --only-write-path`` (one process,
one run, so the figures share the machine's state):

- ``local``: one node on its local WAL (fsync, uploads later), the reference;
- ``object``: 3 brokers in cluster mode on the object WAL, on its defaults (an append is
  acknowledged once its batch object is PUT to SeaweedFS and committed in PostgreSQL);
- ``shared``: the same cluster with ``s3stream.wal.mode=shared`` (skipped, with the reason, if a
  broker refuses to start with it);
- ``object-1``, ``shared-1``: a cluster of one broker on that WAL, which separates what cluster
  mode costs a broker from what three brokers, PostgreSQL and SeaweedFS cost each other on a
  machine with fewer cores than processes;
- ``local-s3``: the single node uploading to SeaweedFS, as the clusters do (``local`` uploads to a
  directory, which costs this machine's cores far less than an S3 server beside the broker).

``--linger-ms`` sets the producer's ``linger.ms`` at the fixed rate (librdkafka's default, 5 ms,
is part of every acknowledgement time; 0 shows the broker's own).

``--split-cores`` gives the brokers CPU 0 and everything else (SeaweedFS, PostgreSQL, this process
and its clients) CPU 1, once a target is up: on a 2-core machine it shows a broker's own write path
with a core to itself, apart from the object store and the clients competing for its core (run it on
the one-broker kinds: three brokers on one core measure that core, not the WAL).

For each: p50/p99 of the acknowledgement time at a fixed rate (confluent-kafka, idempotent,
acks=all, 1 KiB values, 12 partitions), MB/s flat out (the same producer as fast as it goes), the
ratios to the single node, and the object PUTs per second per broker during the fixed rate, with
what that many requests would cost per month at S3 request prices.

The same fixed rate is also sent by aiokafka (idempotent, acks=all, linger 0). librdkafka puts one
partition in each ProduceRequest (its issue #1700) and an idempotent producer keeps at most five
requests in flight per connection, so 12 partitions on one broker take turns for five slots: an
acknowledgement then waits for its partition's turn as well as for the broker, about twice the
broker's own time when that is ~10 ms (the object WAL). aiokafka, as the Java client, sends every
ready partition of a broker in one request, which shows what the broker itself answers in.

``--write-path-partitions`` (default 12) spreads the same rate over that many partitions. At 1,200
and 600 msg/s each partition gets a record every 2 s: what the brokers cost at that size when only
producing, apart from the consumers, table and faults that ``bench/fault_run.py --partitions 1200``
adds on the same cores.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import statistics
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from percentiles import nearest_rank

from tabletopic.cluster.local import LocalCluster, SeaweedFS
from tests.support.broker_process import BrokerProcess
from tests.support.processes import descendants

PARTITIONS = 12  # the default; --write-path-partitions sets another
VALUE = b"v" * 1024
SECONDS_PER_MONTH = 30 * 24 * 3600
# Request prices per 1,000 PUT requests, us-east-1, from the Amazon S3 pricing page ("Requests &
# data retrievals"): S3 Standard $0.005; S3 Express One Zone $0.00113 since its April 2025 price cut
# (Express One Zone also charges $0.0032 per GB uploaded beyond 512 KB of each request, not counted).
S3_STANDARD_PUT_PER_1000 = 0.005
S3_EXPRESS_ONE_ZONE_PUT_PER_1000 = 0.00113
# Uploads of the object WAL and of the local WAL: one object each (a batch stays under
# s3stream.stream.object.split.bytes, so no stream gets an object of its own).
UPLOADS_METRIC = re.compile(r"^tabletopic_s3stream_upload_seconds_count\s+([0-9.e+]+)$", re.M)
PHASE_METRIC = re.compile(
    r'^tabletopic_s3stream_upload_phase_seconds_(sum|count)\{phase="(\w+)"\}\s+([0-9.e+-]+)$', re.M
)
PHASES = ("reserve", "build", "put", "turn", "commit")


@dataclass
class Figures:
    kind: str
    brokers: int
    p50_ms: float
    p99_ms: float
    errors: int
    mb_per_s: float
    puts_per_s: list[float]
    phases_ms: dict[str, float]  # mean time per upload in each phase at the fixed rate
    batching_p50_ms: float = float("nan")  # aiokafka: all of a broker's partitions in one request
    batching_p99_ms: float = float("nan")
    # CPU seconds per GB acknowledged flat out, by role (brokers, object store, metadata DB, clients)
    cpu_per_gb: dict[str, float] = field(default_factory=dict)


@dataclass
class Target:
    bootstrap: str
    metrics_urls: list[str]


def scrape(url: str) -> tuple[float, dict[tuple[str, str], float]]:
    """A broker's uploads so far, and its upload phase sums and counts by (sum|count, phase)."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    match = UPLOADS_METRIC.search(text)
    phases = {(kind, phase): float(value) for kind, phase, value in PHASE_METRIC.findall(text)}
    return (float(match.group(1)) if match else 0.0), phases


def phase_means(
    before: list[dict[tuple[str, str], float]], after: list[dict[tuple[str, str], float]]
) -> dict[str, float]:
    """Mean milliseconds per upload of each phase over every broker, between two scrapes."""
    means = {}
    for phase in PHASES:
        total = sum(
            a.get(("sum", phase), 0.0) - b.get(("sum", phase), 0.0)
            for a, b in zip(after, before, strict=True)
        )
        count = sum(
            a.get(("count", phase), 0.0) - b.get(("count", phase), 0.0)
            for a, b in zip(after, before, strict=True)
        )
        if count:
            means[phase] = total / count * 1000
    return means


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"write-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(60)
    warm = producer(bootstrap)
    for partition in range(partitions):  # every leader placed and answering before timing
        warm.produce(topic, value=b"warm", partition=partition)
    if warm.flush(60):
        raise RuntimeError(f"topic {topic}: warm-up writes not acknowledged within 60 s")
    return topic


def producer(bootstrap: str, extra: dict[str, object] | None = None) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", **(extra or {})}
    )


def warm_producer(bootstrap: str, topic: str, extra: dict[str, object] | None = None) -> Producer:
    """A producer that has written one acknowledged record: connected, with its producer id."""
    client = producer(bootstrap, extra)
    client.produce(topic, value=b"warm", partition=0)
    if client.flush(60):
        raise RuntimeError(f"topic {topic}: the producer's first write was not acknowledged within 60 s")
    return client


def fixed_rate(
    bootstrap: str, topic: str, partitions: int, rate: int, seconds: float, linger_ms: float | None = None
) -> tuple[list[float], int]:
    """Acknowledgement times (seconds from produce() to the delivery report) of ``rate`` msg/s,
    from a producer that has its producer id: librdkafka asks for one only after a 500 ms timer when
    no connection is up yet at creation, which counted against the broker put 2.5 % of the records
    of an 8 s run at 430 ms or more, the p99 of every WAL kind alike."""
    client = warm_producer(bootstrap, topic, None if linger_ms is None else {"linger.ms": linger_ms})
    latencies: list[float] = []
    errors = [0]

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors[0] += 1
        else:
            latency = msg.latency()
            if latency is not None:
                latencies.append(latency)

    interval = 1 / rate
    started = next_at = time.monotonic()
    i = 0
    while time.monotonic() - started < seconds:
        client.produce(topic, value=VALUE, partition=i % partitions, on_delivery=delivered)
        i += 1
        client.poll(0)
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    client.flush(60)
    return latencies, errors[0]


async def _batching_fixed_rate(
    bootstrap: str, topic: str, partitions: int, rate: int, seconds: float
) -> list[float]:
    client = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=0)
    await client.start()
    latencies: list[float] = []

    async def acknowledged(delivery: asyncio.Future[object], sent_at: float) -> None:
        await delivery
        latencies.append(time.perf_counter() - sent_at)

    try:
        await (await client.send(topic, b"warm", partition=0))  # connected, with its producer id
        waits = []
        started = next_at = time.monotonic()
        i = 0
        while time.monotonic() - started < seconds:
            sent_at = time.perf_counter()
            delivery = await client.send(topic, VALUE, partition=i % partitions)
            waits.append(asyncio.ensure_future(acknowledged(delivery, sent_at)))
            i += 1
            next_at += 1 / rate
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        await asyncio.gather(*waits)
    finally:
        await client.stop()
    return latencies


def batching_fixed_rate(
    bootstrap: str, topic: str, partitions: int, rate: int, seconds: float
) -> tuple[float, float]:
    """p50 and p99 (ms) of ``rate`` msg/s from aiokafka, which sends all the partitions a broker
    leads in one request (see the module docstring)."""
    latencies = asyncio.run(_batching_fixed_rate(bootstrap, topic, partitions, rate, seconds))
    return nearest_rank(latencies, 0.5) * 1000, nearest_rank(latencies, 0.99) * 1000


def flat_out(bootstrap: str, topic: str, partitions: int, seconds: float) -> float:
    """MB/s (10^6 bytes of values) acknowledged to one idempotent producer writing 1 KiB values as
    fast as it can."""
    client = warm_producer(bootstrap, topic, {"linger.ms": 20, "batch.size": 1 << 20})
    acked = [0]

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            acked[0] += 1

    started = time.monotonic()
    i = 0
    while time.monotonic() - started < seconds:
        try:
            client.produce(topic, value=VALUE, partition=i % partitions, on_delivery=delivered)
            i += 1
        except BufferError:
            client.poll(0.01)
        client.poll(0)
    client.flush(60)
    return acked[0] * len(VALUE) / (time.monotonic() - started) / 1e6


def measure(
    kind: str, target: Target, partitions: int, rate: int, seconds: float, linger_ms: float | None = None
) -> Figures:
    topic = create_topic(target.bootstrap, partitions)
    before = [scrape(url) for url in target.metrics_urls]
    began = time.monotonic()
    latencies, errors = fixed_rate(target.bootstrap, topic, partitions, rate, seconds, linger_ms)
    elapsed = time.monotonic() - began
    after = [scrape(url) for url in target.metrics_urls]
    puts = [(a[0] - b[0]) / elapsed for a, b in zip(after, before, strict=True)]
    phases = phase_means([b[1] for b in before], [a[1] for a in after])
    p50, p99 = nearest_rank(latencies, 0.5), nearest_rank(latencies, 0.99)
    batching = batching_fixed_rate(
        target.bootstrap, create_topic(target.bootstrap, partitions), partitions, rate, seconds
    )
    flat_topic = create_topic(target.bootstrap, partitions)
    cpu_before, flat_began = cpu_seconds(), time.monotonic()
    mb_per_s = flat_out(target.bootstrap, flat_topic, partitions, seconds)
    gigabytes = mb_per_s * (time.monotonic() - flat_began) / 1000
    cpu_used = {role: spent - cpu_before.get(role, 0.0) for role, spent in cpu_seconds().items()}
    cpu_per_gb = {role: spent / gigabytes for role, spent in cpu_used.items()} if gigabytes else {}
    return Figures(
        kind,
        len(target.metrics_urls),
        p50 * 1000,
        p99 * 1000,
        errors,
        mb_per_s,
        puts,
        phases,
        *batching,
        cpu_per_gb,
    )


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of the bench's processes by role: the brokers, the object store
    (SeaweedFS), the metadata DB (PostgreSQL) and this process, whose threads are the clients. On a
    machine where they all share a few cores, a broker's own cost per GB is what carries over to
    one where the object store and the database run elsewhere."""
    ticks = os.sysconf("SC_CLK_TCK")
    totals = {"brokers": 0.0, "object store": 0.0, "metadata DB": 0.0, "clients": time.process_time()}
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        role = _role(words)
        if role is not None:
            totals[role] += (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    return totals


def _role(words: list[bytes]) -> str | None:
    program = words[0].rsplit(b"/", 1)[-1]
    if b"python" in program and b"tabletopic" in words:
        return "brokers"
    if program == b"weed":
        return "object store"
    if program.startswith(b"postgres"):
        return "metadata DB"
    return None


@contextmanager
def single_node(s3: bool = False) -> Iterator[Target]:
    """One node on its local WAL, uploading to a local directory, or with ``s3`` to SeaweedFS
    as the clusters do (the upload's CPU is then paid on this machine as in a cluster)."""
    with tempfile.TemporaryDirectory(prefix="write-path-local-") as tmp:
        server = SeaweedFS(Path(tmp) / "s3").start() if s3 else None
        settings = {"s3stream.wal.mode": "local", **(server.s3_settings() if server else {})}
        broker = BrokerProcess(Path(tmp) / "node", settings).start()
        try:
            yield Target(broker.bootstrap, [broker.admin_url + "/metrics"])
        finally:
            broker.stop()
            if server is not None:
                server.stop()


@contextmanager
def cluster(wal_mode: str, brokers: int = 3, extra: dict[str, str] | None = None) -> Iterator[Target]:
    root = Path(tempfile.mkdtemp(prefix=f"write-path-{wal_mode}-"))
    root.chmod(0o755)  # PostgreSQL runs as its own user when the bench runs as root
    settings = {"s3stream.wal.mode": wal_mode, "table.job.runner": "inprocess", **(extra or {})}
    if wal_mode == "shared":
        settings["s3stream.wal.path"] = str(root / "shared-wal")
    nodes = LocalCluster(root, nodes=brokers, base_port=0, settings=settings)
    try:
        nodes.start()
        time.sleep(3)  # the controller places the partitions over the brokers
        yield Target(
            nodes.bootstrap, [f"http://127.0.0.1:{b.admin_port}/metrics" for b in nodes.brokers.values()]
        )
    finally:
        nodes.stop()
        shutil.rmtree(root, ignore_errors=True)


def _pin(pid: int, cpu: int) -> None:
    """Pin every thread of ``pid`` to ``cpu`` (threads started later inherit their creator's)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})
    except (OSError, ProcessLookupError):
        pass  # it ended meanwhile


def split_cores() -> str:
    """Brokers on CPU 0, the rest on CPU 1 (see the module docstring); returns what was pinned."""
    brokers = others = 0
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:
            continue
        # A broker runs ``python -m tabletopic serve``; its overrides may name PostgreSQL's URL.
        is_broker = b"python" in words[0] and b"tabletopic" in words
        _pin(pid, 0 if is_broker else 1)
        brokers, others = brokers + is_broker, others + (not is_broker)
    _pin(os.getpid(), 1)
    return f"{brokers} broker processes on CPU 0, {others} others and this bench on CPU 1"


def monthly_cost(puts_per_s: float, price_per_1000: float) -> float:
    return puts_per_s * SECONDS_PER_MONTH / 1000 * price_per_1000


def run_write_path(
    kinds: list[str],
    rate: int,
    seconds: float,
    extra: dict[str, str] | None = None,
    linger_ms: float | None = None,
    split: bool = False,
    partitions: int = PARTITIONS,
) -> list[Figures]:
    """Measure every kind in ``kinds`` (local, object, shared) and print the table; ``extra``
    settings go to the cluster's brokers."""
    targets: dict[str, Callable[[], AbstractContextManager[Target]]] = {
        "local": single_node,
        "local-s3": lambda: single_node(s3=True),
        "object": lambda: cluster("object", extra=extra),
        "shared": lambda: cluster("shared", extra=extra),
        # One broker in cluster mode: what cluster mode costs a broker, apart from three brokers,
        # PostgreSQL and SeaweedFS sharing a small machine's cores.
        "object-1": lambda: cluster("object", brokers=1, extra=extra),
        "shared-1": lambda: cluster("shared", brokers=1, extra=extra),
    }
    print(f"write path: {rate} msg/s of 1 KiB for {seconds:.0f} s, then flat out for {seconds:.0f} s; "
          f"confluent-kafka idempotent acks=all, {partitions:,} partitions")  # fmt: skip
    if extra:
        print("cluster brokers set: " + ", ".join(f"{k}={v}" for k, v in extra.items()))
    if linger_ms is not None:
        print(f"producer linger.ms at the fixed rate: {linger_ms:g}")
    print("(a 2-core machine shared with other jobs: figures are noisy)")
    if split:
        print("split cores: the brokers on CPU 0, SeaweedFS, PostgreSQL and the clients on CPU 1")
    results: list[Figures] = []
    for kind in kinds:
        if kind not in targets:
            print(f"{kind}: unknown WAL kind (choose from {', '.join(targets)}), skipped")
            continue
        try:
            with targets[kind]() as target:
                if split:
                    print(f"{kind}: {split_cores()}")
                results.append(measure(kind, target, partitions, rate, seconds, linger_ms))
        except Exception as exc:  # a kind this build does not support: say so and go on
            print(f"{kind}: skipped, it did not start or run: {' '.join(str(exc).split())[:400]}")
    report(results)
    return results


def report(results: list[Figures]) -> None:
    base = next((r for r in results if r.kind == "local"), None)
    base_s3 = next((r for r in results if r.kind == "local-s3"), None)
    print()
    print(f"{'WAL':<9}{'brokers':>8}{'p50 ms':>9}{'p99 ms':>9}{'MB/s':>9}{'ratio':>7}{'vs s3':>7}"
          f"{'PUT/s/broker':>14}{'S3 Std $/mo':>13}{'Express $/mo':>14}  errors")  # fmt: skip
    for r in results:
        ratio = r.mb_per_s / base.mb_per_s if base and base.mb_per_s else float("nan")
        ratio_s3 = r.mb_per_s / base_s3.mb_per_s if base_s3 and base_s3.mb_per_s else float("nan")
        puts = statistics.mean(r.puts_per_s) if r.puts_per_s else 0.0
        print(f"{r.kind:<9}{r.brokers:>8}{r.p50_ms:>9.1f}{r.p99_ms:>9.1f}{r.mb_per_s:>9.1f}{ratio:>7.2f}"
              f"{ratio_s3:>7.2f}{puts:>14.1f}{monthly_cost(puts, S3_STANDARD_PUT_PER_1000):>13,.0f}"
              f"{monthly_cost(puts, S3_EXPRESS_ONE_ZONE_PUT_PER_1000):>14,.0f}  {r.errors}")  # fmt: skip
    print("ratio: MB/s flat out against the one node on its local WAL; vs s3: against the same node "
          "uploading to SeaweedFS (local-s3), when measured")  # fmt: skip
    print("the same fixed rate from aiokafka (every partition of a broker in one request, linger 0), "
          "p50 / p99 ms:")  # fmt: skip
    for r in results:
        print(f"  {r.kind:<9}{r.batching_p50_ms:>8.1f}{r.batching_p99_ms:>9.1f}")
    for r in results:
        if r.phases_ms:
            spent = ", ".join(f"{phase} {ms:.1f}" for phase, ms in r.phases_ms.items())
            print(f"{r.kind}: mean ms per upload at the fixed rate: {spent}")
    print("CPU seconds per GB acknowledged flat out (brokers / object store / metadata DB / clients), "
          "and the brokers' share of a core:")  # fmt: skip
    for r in results:
        cost = r.cpu_per_gb
        if cost:
            core = cost["brokers"] * r.mb_per_s / 1000 * 100
            roles = "".join(f"{spent:>6.1f}" for spent in cost.values())
            print(f"  {r.kind:<9}{roles}   brokers at {core:.0f}% of a core")
    print(f"PUT prices per 1,000 requests (us-east-1): S3 Standard ${S3_STANDARD_PUT_PER_1000}, "
          f"S3 Express One Zone ${S3_EXPRESS_ONE_ZONE_PUT_PER_1000}; cost per broker per 30-day month "
          "of the PUTs at the fixed rate (requests only)")  # fmt: skip
