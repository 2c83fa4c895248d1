"""``tabletopic cluster up`` starts a whole cluster (PostgreSQL, SeaweedFS, brokers) and stops it on
Ctrl-C; ``tabletopic cluster status`` shows brokers, leaders and coordinators."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tabletopic.cluster.local import SECRET_KEY
from tests.support.cluster import CLUSTER_TEST_MARKS, wait_until
from tests.support.group_member import GroupMember
from tests.support.kafka_clients import create_topic, read_values
from tests.support.table_producers import SteadyProducer

pytestmark = CLUSTER_TEST_MARKS


@pytest.fixture(scope="module")
def cluster_dir() -> Iterator[Path]:
    """A data directory the postgres user can reach when the tests run as root (pytest's own
    temporary directories are mode 0700)."""
    parent = Path(tempfile.mkdtemp(prefix="tabletopic-cluster-cli-", dir="/var/tmp"))
    parent.chmod(0o755)
    yield parent / "cluster-data"
    shutil.rmtree(parent, ignore_errors=True)


UP_ARGS = ("--nodes", "2", "--racks", "a,b")


@dataclass
class Running:
    """The module's one ``cluster up`` (2 brokers on the documented ports, started beside its data
    directory), shared by the tests because starting one takes half a minute. A test that stops it
    and starts another puts the new one here, and the fixture stops whichever runs at the end."""

    up: ClusterUp
    here: Path


@pytest.fixture(scope="module")
def running(cluster_dir: Path) -> Iterator[Running]:
    here = cluster_dir.parent
    shared = Running(ClusterUp(Path(cluster_dir.name), *UP_ARGS, cwd=here), here)
    try:
        shared.up.wait_for("cluster is up")
        yield shared
    finally:
        assert shared.up.stop() == 0, shared.up.text


class ClusterUp:
    """A ``tabletopic cluster up`` process whose output is collected as it comes."""

    def __init__(self, data_dir: Path, *args: str, cwd: Path | None = None) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tabletopic", "cluster", "up", "--data-dir", str(data_dir),
             "--override", "table.job.runner=inprocess", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
            env=dict(os.environ, COLUMNS="400", PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, needle: str, timeout: float = 180) -> str:
        try:
            wait_until(lambda: needle in self.text or self.process.poll() is not None, timeout, interval=0.2)
        except TimeoutError as exc:
            raise AssertionError(f"no {needle!r} in:\n{self.text}") from exc
        assert needle in self.text, "cluster up exited:\n" + self.text
        return self.text

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(90)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self.reader.join(10)
        if "did not stop within" in self.text:  # a broker's stop hung: show why in the run's summary
            hung = self.text[self.text.index("did not stop within") - 200 :]
            warnings.warn(hung, RuntimeWarning, stacklevel=2)
        return self.process.returncode


def cli(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=dict(os.environ, COLUMNS="400"),
    )  # fmt: skip


def test_cluster_up_serves_on_documented_ports_and_commands_find_it_without_flags(
    running: Running, cluster_dir: Path
) -> None:
    """Broker N on 9092/8080/8081/8181 + 10 x (N-1) (a taken port replaced, said so), every endpoint
    and the metadata URL in cluster-data/cluster.json; run beside it, `cluster status` and the client
    commands need no flag."""
    here = running.here
    text = running.up.wait_for("cluster is up")
    recorded = json.loads((cluster_dir / "cluster.json").read_text())
    brokers = {b["node_id"]: b for b in recorded["brokers"]}
    for node_id, broker in brokers.items():
        offset = 10 * (node_id - 1)
        for name, default, value in (
            ("kafka", 9092, broker["kafka"].rpartition(":")[2]),
            ("admin", 8080, broker["admin"].rpartition(":")[2]),
            ("registry", 8081, broker["registry"].rpartition(":")[2]),
            ("catalog", 8181, broker["catalog"].rpartition(":")[2]),
        ):
            port = default + offset
            assert int(value) == port or f"port {port} ({name} of broker {node_id}) is taken" in text, text
    assert "broker 1 (rack a)" in text and "broker 2 (rack b)" in text
    assert "tabletopic cluster status\n" in text  # no flag to copy
    assert recorded["metadata_url"] in text
    empty = cli("topics", "list", cwd=here)  # a new cluster: nothing to list, and said so apart
    assert (empty.returncode, empty.stdout) == (0, ""), empty.stderr
    assert "no topics on 127.0.0.1:" in empty.stderr and "tabletopic topics create NAME" in empty.stderr
    create_topic(recorded["bootstrap_servers"], "orders", 4)

    def status() -> str:
        result = cli("cluster", "status", cwd=here)
        assert result.returncode == 0, result.stderr
        return result.stdout

    report = wait_until(
        lambda: (s := status()) and s.count("\norders\t") == 4 and s, timeout=30, interval=0.5
    )
    assert re.search(r"^1\ta\t1\talive\t", report, re.M), report
    assert re.search(r"^2\tb\t1\talive\t", report, re.M), report
    assert "controller: broker" in report
    listed = cli("topics", "list", cwd=here)  # the first broker's endpoints, written beside
    assert listed.returncode == 0 and "orders" in listed.stdout, listed.stdout + listed.stderr
    # The brokers (up and reaching the object store, as above) got the S3 secret through their
    # environment: a command line is there for every user of the machine to read.
    brokers_seen = 0
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if " serve " in cmdline and str(cluster_dir) in cmdline:
            brokers_seen += 1
            assert SECRET_KEY not in cmdline and "secret.key" not in cmdline, cmdline
            assert f"TABLETOPIC_S3_SECRET_KEY={SECRET_KEY}".encode() in (proc / "environ").read_bytes()
    assert brokers_seen == len(brokers), brokers_seen


def test_cluster_status_without_a_cluster_says_how_to_find_one(tmp_path: Path) -> None:
    result = cli("cluster", "status", cwd=tmp_path)
    assert result.returncode == 2
    assert "cluster-data/cluster.json does not exist" in result.stderr, result.stderr
    assert "tabletopic cluster up" in result.stderr and "--metadata-url" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the directory to the postgres user")
def test_as_root_a_data_directory_postgres_cannot_reach_is_named(tmp_path: Path) -> None:
    from tabletopic.cluster.local import PostgresServer, postgres_bin_dir

    if postgres_bin_dir() is None:
        pytest.skip("PostgreSQL server not installed")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    with pytest.raises(RuntimeError, match=r"cannot reach .*locked.* is not searchable.*chmod o\+x"):
        PostgresServer(locked / "postgres", keep=True).start()


def test_cluster_up_names_the_registered_brokers_it_did_not_start(postgres_url: str) -> None:
    """A broker added by `cluster add` in an earlier run, beyond --nodes, is named at start (how to
    start it or remove it) instead of showing up only as dead in `cluster status`."""
    from tabletopic import database
    from tabletopic.cluster.db import ClusterMetadata
    from tabletopic.cluster.up_control import not_started
    from tabletopic.ids import NodeId

    url = postgres_url
    engine = database.create_engine(url)
    try:
        meta = ClusterMetadata(engine)
        meta.migrate()
        for node in (1, 2, 4):
            meta.register(NodeId(node), None, {"PLAINTEXT": ("127.0.0.1", 9092)}, lease_s=30)
    finally:
        engine.dispose()
    assert not_started(url, {1, 2}) == [4]
    assert not_started(url, {1, 2, 4}) == []


def test_cluster_up_reports_a_dead_broker_and_cluster_restart_brings_it_back(
    running: Running, cluster_dir: Path
) -> None:
    up = running.up
    up.wait_for("cluster is up")
    recorded = json.loads((cluster_dir / "cluster.json").read_text())
    create_topic(recorded["bootstrap_servers"], "payments", 4)
    victim = next(b for b in recorded["brokers"] if b["node_id"] == 2)
    wait_until(
        lambda: "payments\t" in cli("cluster", "status", "--data-dir", str(cluster_dir)).stdout, timeout=30
    )
    os.kill(victim["pid"], signal.SIGKILL)
    text = up.wait_for("Restart it with: tabletopic cluster restart 2", timeout=30)
    assert "broker 2 was killed by SIGKILL" in text, text
    # Who took its partitions over, which the survivor's own log does not say.
    text = up.wait_for("broker 2 is dead: the ", timeout=90)
    assert re.search(r"broker 2 is dead: the \d+ partitions it led are now led by broker 1 \(\d+\)", text), (
        text
    )
    restarted = cli("cluster", "restart", "2", "--data-dir", str(cluster_dir), timeout=200)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert "broker 2 is up again" in restarted.stdout
    again = {b["node_id"]: b for b in json.loads((cluster_dir / "cluster.json").read_text())["brokers"]}
    assert again[2]["pid"] not in (None, victim["pid"]) and again[2]["kafka"] == victim["kafka"]
    missing = cli("cluster", "restart", "7", "--data-dir", str(cluster_dir), timeout=60)
    assert missing.returncode == 1 and "there is no broker 7" in missing.stderr, missing.stderr


def test_cluster_add_scales_out_and_cluster_stop_scales_in_under_a_producer_and_a_group(
    running: Running, cluster_dir: Path
) -> None:
    """What a user scaling the local cluster sees: `cluster add` starts broker 3, which the balancer
    gives partitions; `cluster stop 3` has it hand them back and exit; `cluster unregister 3` removes
    it. Meanwhile an idempotent producer writes and a consumer group reads: every acknowledged
    record is in the topic once, the group reads every one and commits to the end."""
    from confluent_kafka import Consumer, TopicPartition

    running.up.wait_for("cluster is up")
    where = ("--data-dir", str(cluster_dir))
    bootstrap = json.loads((cluster_dir / "cluster.json").read_text())["bootstrap_servers"]
    topic, group, partitions = f"scaled-{uuid.uuid4().hex[:6]}", f"scaled-{uuid.uuid4().hex[:6]}", 6
    create_topic(bootstrap, topic, partitions)

    def leads(node: int) -> int:
        """How many of the topic's partitions broker ``node`` leads, as `cluster status` says."""
        rows = [line.split("\t") for line in cli("cluster", "status", *where).stdout.splitlines()]
        return sum(1 for row in rows if len(row) > 2 and row[0] == topic and row[2] == str(node))

    member = GroupMember(bootstrap, topic, group)
    member.start()
    try:
        with SteadyProducer(bootstrap, topic, partitions, rate=100) as writer:
            wait_until(lambda: bool(member.seen()), timeout=60)
            added = cli("cluster", "add", *where, timeout=200)
            assert added.returncode == 0, added.stdout + added.stderr
            assert "broker 3 is up (rack a," in added.stdout, added.stdout
            wait_until(lambda: leads(3) > 0, timeout=60, interval=1)  # partitions came to it
            stopped = cli("cluster", "stop", "3", *where, timeout=200)
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
            assert "broker 3 stopped (" in stopped.stdout and "after handing its partitions" in stopped.stdout
            wait_until(lambda: leads(3) == 0, timeout=30, interval=1)
            time.sleep(2)  # writes go on to the brokers left
        acked = writer.acked_values()
        stored = read_values(bootstrap, topic, partitions, len(acked))
        assert sorted(stored) == sorted(acked)  # each acknowledged record once, nothing else
        wait_until(lambda: acked <= set(member.seen()), timeout=60, interval=0.5)

        def committed_to_the_end() -> bool:
            probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
            try:
                asked = [TopicPartition(topic, p) for p in range(partitions)]
                ends = [probe.get_watermark_offsets(tp, timeout=10)[1] for tp in asked]
                return [tp.offset for tp in probe.committed(asked, timeout=10)] == ends
            finally:
                probe.close()

        wait_until(committed_to_the_end, timeout=30, interval=1)
    finally:
        member.stop()
    again = cli("cluster", "stop", "3", *where, timeout=60)
    assert again.returncode == 1 and "broker 3 is not running (running: 1, 2)" in again.stderr, again.stderr
    removed = cli("cluster", "unregister", "3", *where)
    assert removed.returncode == 0, removed.stderr
    assert "\n3\t" not in cli("cluster", "status", *where).stdout
    assert "adding broker 3 (asked by `tabletopic cluster add`)" in running.up.text


def test_a_second_cluster_up_on_the_same_directory_keeps_the_topics(
    running: Running, cluster_dir: Path
) -> None:
    """The metadata (PostgreSQL) stays under the data directory with the objects, as root too.
    Stops the shared cluster (after which `cluster restart` finds none running) and leaves the
    second one running in its place."""
    text = running.up.wait_for("cluster is up")
    bootstrap = re.search(r"bootstrap servers: (\S+)", text)
    assert bootstrap, text
    create_topic(bootstrap.group(1), "kept", 2)
    assert running.up.stop() == 0, running.up.text
    assert (cluster_dir / "postgres" / "data" / "PG_VERSION").exists()
    after = cli("cluster", "restart", "1", "--data-dir", str(cluster_dir))
    assert after.returncode == 1 and "no `tabletopic cluster up` is running" in after.stderr, after.stderr
    # Free ports this time (the ports are not what is tested here): SeaweedFS servers on this
    # machine may hold the 9100s, where broker 2's default ports are.
    running.up = ClusterUp(Path(cluster_dir.name), *UP_ARGS, "--base-port", "0", cwd=running.here)
    text = running.up.wait_for("cluster is up")
    url = re.search(r"metadata.url:\s+(\S+)", text)
    assert url, text
    result = cli("cluster", "status", "--metadata-url", url.group(1))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("kept\t") == 2, result.stdout
