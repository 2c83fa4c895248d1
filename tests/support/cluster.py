"""A cluster of real ``tabletopic serve`` processes on loopback sharing one PostgreSQL database and
one SeaweedFS bucket, for the cluster tests and the cluster bench."""

from __future__ import annotations

import functools
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata
from tabletopic.cluster.local import start_together
from tests.support.broker_process import BrokerProcess, start_with_env
from tests.support.kafka_clients import create_topic
from tests.support.kafka_requests import make_batch, produce_request, request
from tests.support.ports import free_port
from tests.support.raw_kafka_client import connect, roundtrip
from tests.support.waiting import wait_until_sync

# What every test of the shared cluster needs: PostgreSQL, SeaweedFS, broker processes (slow).
CLUSTER_TEST_MARKS = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]

# Renewals twice as often as by default so failover tests take seconds, with the default 3 s lease
# (shorter ones expire on a loaded 2-core machine). Table jobs run in process: no JVM per broker.
# The WAL is the shared one, as `tabletopic cluster up`'s (LocalCluster.wal picks the object WAL).
FAST_CLUSTER = {
    "cluster.enable": "true",
    "s3stream.wal.mode": "shared",
    "s3stream.wal.object.batch.ms": "20",
    # Shared WAL: what another broker reads (a table coordinator reading partitions it does not
    # lead, consumers in another zone) is what was uploaded, so upload often (see docs/cluster.md).
    "s3stream.upload.interval.ms": "200",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "table.job.runner": "inprocess",
    "table.coordinator.poll.interval.ms": "200",
    "offsets.topic.num.partitions": "6",
    # A new group's first rebalance starts at once instead of waiting 3 s for more members (every
    # group a test forms is new), and sessions may be as short as 4 s (the group-fencing test
    # watches for two of them).
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "4000",
    "transaction.state.log.num.partitions": "3",
    # A librdkafka transactional producer whose group coordinator dies can stall in
    # send_offsets_to_transaction (librdkafka issues 5456 and 5511) until one of its connections is
    # closed; the brokers close idle ones after 20 s (Kafka's default is 10 minutes), so a test that
    # meets the stall waits seconds, not minutes (docs/configuration.md, connections.max.idle.ms).
    "connections.max.idle.ms": "20000",
    "log.cleaner.backoff.ms": "1000",
    # The controller merges the brokers' small objects often; replaced objects stay readable for
    # the grace, longer than a table job between locating its slices and reading them here.
    "s3stream.compaction.interval.ms": "3000",
    "s3stream.object.delete.grace.ms": "60000",
    "controlled.shutdown.timeout.ms": "5000",
    # A fast auto-balancer that only wakes up for real load (the balancer test's, about 1 MB/s per
    # broker), so the other tests' trickles never move anything.
    "auto.balancer.detect.interval.ms": "1000",
    "auto.balancer.metrics.window.ms": "2000",
    "auto.balancer.cooldown.ms": "15000",
    "auto.balancer.min.bytes.per.second": "400000",
    # Brokers reach each other (transaction markers) and themselves (the dead-letter producer) on
    # their SASL listener, logged in as the broker user: the secured inter-broker path in every test.
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "sasl.plain.users": "alice:alice-secret,bob:bob-secret,broker:broker-secret",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-secret";'
    ),
}


@dataclass
class LocalCluster:
    root: Path
    metadata_url: str
    s3: dict[str, str]
    extra: dict[str, str] = field(default_factory=dict)
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    # Every node serves the schema registry and the REST catalog; fixed ports per node id so a
    # restarted node is found where it was.
    catalog_ports: dict[int, int] = field(default_factory=dict)
    registry_ports: dict[int, int] = field(default_factory=dict)
    # s3stream.wal.mode of the brokers: "shared" (a directory under root every broker reaches) or
    # "object".
    wal: str = "shared"

    def registry_url(self, node_id: int) -> str:
        return f"http://127.0.0.1:{self.registry_ports.setdefault(node_id, free_port())}"

    def overrides(self, node_id: int, rack: str | None = None) -> dict[str, str]:
        port = self.catalog_ports.setdefault(node_id, free_port())
        values = {
            **FAST_CLUSTER,
            **self.s3,
            "broker.id": str(node_id),
            "metadata.url": self.metadata_url,
            "schema.registry.listener": self.registry_url(node_id),
            # Tables written by any broker's table coordinator are read by every other one.
            "automq.table.topic.catalog.warehouse": f"file://{self.root / 'warehouse'}",
            "catalog.listener": f"http://127.0.0.1:{port}",
            "s3stream.wal.mode": self.wal,
            **({"s3stream.wal.path": str(self.root / "shared-wal")} if self.wal == "shared" else {}),
            **self.extra,
        }
        if rack:
            values["broker.rack"] = rack
        return values

    def start(
        self, node_id: int, rack: str | None = None, env: dict[str, str] | None = None, **extra: str
    ) -> BrokerProcess:
        """Start (or restart) a broker; ``env`` is added to its environment for this start only
        (e.g. a crash point, ``TABLETOPIC_CRASH_AT``)."""
        broker = self.brokers.get(node_id)
        if broker is not None:
            return start_with_env(broker, env)  # a restart: on the ports it had
        try:
            return start_with_env(self._new_broker(node_id, rack, extra), env)
        except RuntimeError as exc:
            if "the port is in use" not in str(exc):
                raise
        # Another test process's server took one of the ports this new broker was given between
        # choosing and binding (each process hands its ports out on its own): choose them again.
        self.catalog_ports.pop(node_id, None)
        self.registry_ports.pop(node_id, None)
        return start_with_env(self._new_broker(node_id, rack, extra), env)

    def _new_broker(self, node_id: int, rack: str | None, extra: dict[str, str]) -> BrokerProcess:
        broker = BrokerProcess(self.root / f"node-{node_id}", {**self.overrides(node_id, rack), **extra})
        self.brokers[node_id] = broker
        return broker

    def start_many(self, node_ids: list[int], racks: dict[int, str] | None = None) -> None:
        """Start brokers at once (each start mostly waits for Python to import)."""
        start_together([functools.partial(self.start, n, (racks or {}).get(n)) for n in node_ids])

    def running(self) -> dict[int, BrokerProcess]:
        return {n: b for n, b in self.brokers.items() if b.process is not None and b.process.poll() is None}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.running().values())

    def metadata(self, node_id: int, topics: list[str] | None = None) -> Any:
        """The Metadata (v12) answer of one broker."""
        sock = connect(self.brokers[node_id].bootstrap)
        try:
            wanted = None if topics is None else [{"name": t, "topic_id": None} for t in topics]
            return roundtrip(
                sock,
                request(
                    3,
                    12,
                    topics=wanted,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                ),
            )
        finally:
            sock.close()

    def leaders(self, topic: str, via: int | None = None) -> dict[int, tuple[int, int]]:
        """``{partition: (leader, leader epoch)}`` as one broker reports them."""
        node = via if via is not None else next(iter(self.running()))
        answer = self.metadata(node, [topic])
        return {p.partition_index: (p.leader_id, p.leader_epoch) for p in answer.topics[0].partitions}

    def catalog_url(self, node_id: int) -> str:
        return f"http://127.0.0.1:{self.catalog_ports[node_id]}"

    def stop_all(self) -> None:
        for broker in self.brokers.values():
            broker.kill()

    def reset_connections(self) -> int:
        """Reset every TCP connection to the brokers' Kafka listeners at once, clients' and the
        brokers' own, as a network blip or a load balancer would: each side sees a reset with
        requests in flight. ``ss --kill`` destroys the brokers' ends of the sockets (it needs root
        and a kernel with socket destroy, Linux 4.5 on, ``CONFIG_INET_DIAG_DESTROY``). Raises
        :class:`ConnectionResetUnavailable` without ``ss``, when it fails, or when a connection it
        listed is still established after it (a kernel that lists sockets but cannot destroy them:
        a fault test would otherwise pass without its fault). Returns how many it reset."""
        ports = [port for b in self.brokers.values() for port in (b.kafka_port, b.sasl_port) if port]
        sport = "( " + " or ".join(f"sport = :{port}" for port in ports) + " )"
        reset = _established(sport, kill=True)
        survivors = reset & _established(sport, kill=False)
        if survivors:
            raise ConnectionResetUnavailable(
                f"ss --kill listed {len(reset)} connections but {len(survivors)} are still established "
                "(a kernel without socket destroy, CONFIG_INET_DIAG_DESTROY)"
            )
        return len(reset)


def _established(sport: str, kill: bool) -> set[tuple[str, str]]:
    """The established TCP connections matching the ``ss`` filter ``sport``, as (local, peer)
    address pairs; with ``kill``, those ``ss --kill`` listed as it tried to destroy them (the caller
    checks that they are gone)."""
    command = ["ss", "--tcp", "--numeric", *(["--kill"] if kill else []), "state", "established", sport]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise ConnectionResetUnavailable("ss (iproute2) is not installed") from exc
    if done.returncode != 0:
        raise ConnectionResetUnavailable(f"{' '.join(command[:4])} failed: {done.stderr.strip()}")
    rows = (line.split() for line in done.stdout.splitlines()[1:])  # under a header
    return {(row[2], row[3]) for row in rows if len(row) >= 4}


class ConnectionResetUnavailable(RuntimeError):
    """This machine cannot reset connections from outside (see LocalCluster.reset_connections)."""


# The cluster tests and the benches import the blocking wait from here under this name.
wait_until = wait_until_sync


def placed(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """Wait until the controller has placed every partition (its row in the database names a
    leader) and every running broker reports that leader. Metadata alone is not enough: for a
    partition not placed yet a broker reports the leader it predicts, at epoch 1 like a first
    placement, and a reassignment asked for then finds no row to change."""
    engine = database.create_engine(cluster.metadata_url)
    meta = ClusterMetadata(engine)

    def same() -> dict[int, tuple[int, int]] | None:
        rows = meta.snapshot().partitions
        stored = {p: rows[(topic, p)].leader if (topic, p) in rows else None for p in range(partitions)}
        views = [cluster.leaders(topic, via=n) for n in cluster.running()]
        first = views[0]
        complete = len(first) == partitions and all(e > 0 for _, e in first.values())
        agreed = complete and all(first[p][0] == node for p, node in stored.items())
        return first if agreed and all(v == first for v in views) else None

    try:
        return wait_until(same, timeout=30)
    finally:
        engine.dispose()


def new_topic(cluster: LocalCluster, prefix: str, partitions: int) -> tuple[str, dict[int, tuple[int, int]]]:
    """Create a topic named ``prefix-<random>`` (the cluster outlives every test, so each test's
    topics are its own) and wait until it is :func:`placed`.

    Returns:
        The topic's name and ``{partition: (leader, leader epoch)}``.
    """
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.brokers[1].bootstrap, topic, partitions)
    return topic, placed(cluster, topic, partitions)


def move_with_cli(cluster: LocalCluster, topic: str, partition: int, target: int, via: int) -> None:
    """``tabletopic partitions move TOPIC PARTITION --to TARGET`` through broker ``via``, as an
    operator runs it; fails the test if the command does."""
    command = ["partitions", "move", topic, str(partition), "--to", str(target)]
    bootstrap = ["--bootstrap-server", cluster.brokers[via].bootstrap]
    done = subprocess.run(
        [sys.executable, "-m", "tabletopic", *command, *bootstrap], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def one_request(cluster: LocalCluster, node: int, kafka_request: Any) -> Any:
    """Send ``kafka_request`` straight to broker ``node`` on a connection of its own; its answer."""
    sock = connect(cluster.brokers[node].bootstrap)
    try:
        return roundtrip(sock, kafka_request)
    finally:
        sock.close()


def ask_moves(cluster: LocalCluster, topic: str, moves: dict[int, int], via: int) -> None:
    """One AlterPartitionReassignments to broker ``via``: ``{partition: target broker}``. Unlike
    :func:`move_with_cli` it neither starts a process nor waits for the moves, so a test can ask
    while a partition's leader is down, at a moment it must not miss. Fails the test on a refusal."""
    partitions = [{"partition_index": p, "replicas": [node]} for p, node in moves.items()]
    answer = one_request(
        cluster, via, request(45, 0, timeout=10_000, topics=[{"name": topic, "partitions": partitions}])
    )
    assert answer.error_code.value == 0, answer.error_message
    refused = [
        (p.partition_index, p.error_message)
        for t in answer.responses
        for p in t.partitions
        if p.error_code.value
    ]
    assert not refused, refused


def produce_raw(cluster: LocalCluster, node: int, topic: str, partition: int, value: bytes) -> int:
    """Send one Produce straight to ``node``; returns the partition's error code."""
    return produce_raw_answer(cluster, node, topic, partition, value)[0]


def produce_raw_answer(
    cluster: LocalCluster, node: int, topic: str, partition: int, value: bytes
) -> tuple[int, str | None]:
    """Send one Produce straight to ``node``; returns the partition's error code and message (what
    a failing wait should report)."""
    answer = one_request(cluster, node, produce_request(topic, partition, make_batch([value])))
    entry = answer.responses[0].partition_responses[0]
    return int(entry.error_code.value), entry.error_message


def find_coordinator(cluster: LocalCluster, node: int, key: str, key_type: int = 1) -> int:
    """The node ``node`` names as coordinator of ``key`` (FindCoordinator; 1: a transactional id,
    0: a group)."""
    answer = one_request(cluster, node, request(10, 4, key_type=key_type, coordinator_keys=[key]))
    entry = answer.coordinators[0]
    assert entry.error_code.value == 0, entry
    return int(entry.node_id)
