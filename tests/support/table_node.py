"""A ``tabletopic serve`` process seen from the table-topic side: its registry, catalog and admin URLs,
table topics created through a real Kafka AdminClient, bounded waits on ``/v1/tables``, and the
Iceberg tables loaded with pyiceberg through the node's own REST catalog.

Wraps :class:`tests.support.broker_process.BrokerProcess` (owned by the broker tests) rather than
changing it; the bench imports this module too.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.broker_process import BrokerProcess, start_with_env
from tests.support.ports import free_port, wait_for_port
from tests.support.waiting import wait_until_sync

TABLE = "automq.table.topic."


def table_configs(**keys: str) -> dict[str, str]:
    """Topic configs for a table topic: ``convert_value_type="avro"`` becomes
    ``automq.table.topic.convert.value.type``; enabled with a 1 s commit interval by default."""
    configs = {TABLE + "enable": "true", TABLE + "commit.interval.ms": "1000"}
    for key, value in keys.items():
        configs[TABLE + key.replace("__", "-").replace("_", ".")] = value
    return configs


def raw_table_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Same as :func:`table_configs` for keys whose names contain underscores (``by_latest_schema``)."""
    return {TABLE + "enable": "true", TABLE + "commit.interval.ms": "1000", **configs}


@dataclass
class TableNode:
    """One node with fixed registry and catalog ports (kept across restarts)."""

    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    registry_port: int = 0
    catalog_port: int = 0
    broker: BrokerProcess | None = None
    _admin: Any = None
    _admin_bootstrap: str = ""

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    @property
    def catalog_url(self) -> str:
        return f"http://127.0.0.1:{self.catalog_port}"

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None
        return self.broker.bootstrap

    @property
    def admin_url(self) -> str:
        assert self.broker is not None
        return self.broker.admin_url

    @property
    def cli_options(self) -> list[str]:
        """``-d/-o`` options that make ``tabletopic sql|tables|demo`` talk to this node."""
        assert self.broker is not None
        options = ["--data-dir", str(self.data_dir)]
        for key, value in self._settings().items():
            options += ["--override", f"{key}={value}"]
        return options

    def client_config(self) -> Any:
        """The node's configuration as its client commands resolve it (``-d``/``--override``)."""
        from tabletopic.cli_common import load_config

        return load_config(self.data_dir, None, [f"{k}={v}" for k, v in self._settings().items()])

    def _settings(self) -> dict[str, str]:
        assert self.broker is not None
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.broker.kafka_port}",
            "admin.listener": self.admin_url,
            "schema.registry.listener": self.registry_url,
            "catalog.listener": self.catalog_url,
            **self.overrides,
        }

    def start(self, env: Mapping[str, str] | None = None, timeout: float = 120.0) -> TableNode:
        """Start (or restart, on the same ports and data) with ``env`` added to the environment."""
        if not self.registry_port:
            self.registry_port, self.catalog_port = free_port(), free_port()
        if self.broker is None:
            self.broker = BrokerProcess(self.data_dir, dict(self.overrides))
        self.broker.overrides.update(
            {
                "schema.registry.listener": self.registry_url,
                "catalog.listener": self.catalog_url,
            }
        )
        self.env = dict(env or {})
        start_with_env(self.broker, self.env, timeout)
        wait_for_port(self.catalog_port, timeout)
        return self

    def kill(self) -> None:
        if self.broker is not None:
            self.broker.kill()

    def stop(self) -> None:
        self._admin = None
        gc.collect()  # destroys the librdkafka handle now, not after it spent a while reconnecting
        if self.broker is not None:
            self.broker.stop()

    @property
    def alive(self) -> bool:
        return bool(self.broker and self.broker.process and self.broker.process.poll() is None)

    def wait_dead(self, timeout: float) -> bool:
        """Whether the process exited within ``timeout`` (a crash point fired)."""
        assert self.broker is not None and self.broker.process is not None
        try:
            self.broker.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        self.broker.process = None
        return True

    def log_tail(self, chars: int = 6000) -> str:
        return self.broker.log_tail(chars) if self.broker else ""

    # ------------------------------------------------------------------------------- Kafka side

    def admin(self) -> Any:
        """A Kafka AdminClient of this node (one per node: librdkafka handles are costly and keep
        reconnecting after the node stops until garbage-collected)."""
        from confluent_kafka.admin import AdminClient

        if self._admin is None or self._admin_bootstrap != self.bootstrap:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
            self._admin_bootstrap = self.bootstrap
        return self._admin

    def create_topic(self, name: str, configs: Mapping[str, str], partitions: int = 1) -> None:
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # must outlive the future, or librdkafka destroys the request
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(configs))],
            request_timeout=30,
        )
        futures[name].result(30)

    def alter_topic(self, name: str, configs: Mapping[str, str]) -> None:
        """IncrementalAlterConfigs SET of ``configs`` on topic ``name``."""
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        resource = ConfigResource(
            ResourceType.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
            ],
        )
        admin = self.admin()
        for future in admin.incremental_alter_configs([resource], request_timeout=30).values():
            future.result(30)

    def registry(self) -> Any:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient({"url": self.registry_url})

    # ------------------------------------------------------------------------------- table side

    def table_status(self, topic: str) -> dict[str, Any] | None:
        response = httpx.get(f"{self.admin_url}/v1/tables/{topic}", timeout=10)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return dict(response.json())

    def trigger_commit(self, topic: str) -> None:
        httpx.post(f"{self.admin_url}/v1/tables/{topic}/commit", timeout=10)

    def pause(self, topic: str) -> None:
        """Start no more ingest cycles of ``topic``; returns once none runs (a cycle triggered while
        another ran starts again at once when it ends, so a commit just awaited may be followed by
        one more)."""
        httpx.post(f"{self.admin_url}/v1/tables/{topic}/pause", timeout=10).raise_for_status()
        self.wait_status(topic, lambda s: s["state"] == "PAUSED", timeout=60, what="paused")

    def resume(self, topic: str) -> None:
        """Undo :meth:`pause`; the next cycle runs at once."""
        httpx.post(f"{self.admin_url}/v1/tables/{topic}/resume", timeout=10).raise_for_status()

    def wait_status(
        self, topic: str, predicate: Callable[[dict[str, Any]], bool], timeout: float, what: str
    ) -> dict[str, Any]:
        """Poll ``/v1/tables/{topic}`` until ``predicate`` holds; fail with the last status and log."""
        status: dict[str, Any] | None = None

        def holds() -> bool:
            nonlocal status
            status = None  # an HTTP error leaves it unknown
            status = self.table_status(topic)
            return status is not None and predicate(status)

        try:
            wait_until_sync(holds, timeout=timeout, interval=0.3)
            assert status is not None
            return status
        except TimeoutError:
            pass
        raise AssertionError(
            f"{topic}: {what} not reached in {timeout}s; last status {status}\n--- log ---\n{self.log_tail()}"
        )

    def wait_committed(
        self, topic: str, end_offsets: Mapping[int, int], timeout: float = 120.0
    ) -> dict[str, Any]:
        """Wait until the table's committed offset of every partition reaches ``end_offsets``."""

        def reached(status: dict[str, Any]) -> bool:
            committed = status["committed_offsets"]
            return all(committed.get(str(p), 0) >= end for p, end in end_offsets.items() if end > 0)

        return self.wait_status(topic, reached, timeout, f"committed offsets {dict(end_offsets)}")

    def catalog(self) -> Any:
        from pyiceberg.catalog import load_catalog

        return load_catalog("e2e", type="rest", uri=self.catalog_url)

    def load_table(self, topic_or_identifier: str, namespace: str = "default") -> Any:
        name = topic_or_identifier
        if "." not in name:
            from tabletopic.table.table_config import sanitize_table_name

            name = f"{namespace}.{sanitize_table_name(name)}"
        return self.catalog().load_table(name)

    def rows(self, topic: str, namespace: str = "default") -> list[dict[str, Any]]:
        return list(self.load_table(topic, namespace).scan().to_arrow().to_pylist())

    def sql(self, statement: str, timeout: float = 240) -> list[dict[str, Any]]:
        """Run ``tabletopic sql --format json`` against this node; the rows it printed."""
        import json

        done = subprocess.run(
            [sys.executable, "-m", "tabletopic", "sql", *self.cli_options, "--format", "json", statement],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ, TABLETOPIC_LOG_LEVEL="WARNING"),
        )
        if done.returncode != 0:
            raise AssertionError(f"tabletopic sql failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def delivered_positions(messages: Iterable[Any]) -> set[tuple[int, int]]:
    return {(m.partition(), m.offset()) for m in messages}


class DeliveryLog:
    """Collects a producer's delivery reports: the (partition, offset) of every acknowledged record."""

    def __init__(self) -> None:
        self.acked: set[tuple[int, int]] = set()
        self.values: dict[tuple[int, int], Any] = {}
        self.errors: list[str] = []
        # Records acknowledged at a position another record already holds: two records at one
        # offset is a broker fault (or offset -1 for a retried batch), never a client's.
        self.collisions: list[tuple[int, int, Any, Any]] = []
        # Acknowledged without an offset: librdkafka reports a record it cannot place as delivered
        # with offset -1001 (None here), e.g. when a request timed out and a later batch of the
        # partition then succeeded. Such records are checked by partition and count, or by value.
        self.unplaced: list[tuple[int, Any]] = []

    def callback(self, value: Any = None) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
                return
            if msg.offset() is None:
                self.unplaced.append((msg.partition(), value))
                return
            position = (msg.partition(), msg.offset())
            if position in self.acked:
                self.collisions.append((*position, self.values[position], value))
            self.acked.add(position)
            self.values[position] = value

        return on_delivery

    def end_offsets(self) -> dict[int, int]:
        ends: dict[int, int] = {}
        # A copy: a producer thread may still be adding acknowledgements (list() of a set runs
        # without letting another thread in).
        for partition, offset in list(self.acked):
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        return ends


def kill_process_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def table_positions(rows: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """(partition, offset) of every row, from ``_kafka_metadata`` (duplicates kept)."""
    return [(r["_kafka_metadata"]["partition"], r["_kafka_metadata"]["offset"]) for r in rows]


def assert_exactly_once(rows: list[dict[str, Any]], log: DeliveryLog) -> None:
    assert not log.collisions, f"records acknowledged at one offset: {log.collisions[:5]}"
    positions = table_positions(rows)
    duplicates = [p for p, n in Counter(positions).items() if n > 1]
    assert not duplicates, f"duplicated rows at {duplicates[:10]}"
    missing = log.acked - set(positions)
    extra = set(positions) - log.acked
    # Rows beyond the placed acknowledgements are the records acknowledged without an offset.
    unplaced = Counter(partition for partition, _ in log.unplaced)
    assert not missing and Counter(p for p, _ in extra) == unplaced, (
        f"missing {sorted(missing)[:10]}, unexpected {sorted(extra)[:10]} "
        f"({len(log.unplaced)} acknowledged without an offset)"
    )


# Spark in the node: two local cores and a modest heap (CI is a 2-core box shared by every suite).
# A node whose table jobs run in its own process (no Spark JVM): starts in seconds.
INPROCESS_NODE_SETTINGS = {
    "table.job.runner": "inprocess",
    "table.coordinator.poll.interval.ms": "200",
    "log.level": "INFO",
}
SPARK_NODE_SETTINGS = {
    "table.job.runner": "spark",
    "spark.master": "local[2]",
    "spark.driver.memory": "768m",
    "table.coordinator.poll.interval.ms": "200",
    "log.level": "INFO",
    # The console's plots get a point a second (the browser tests wait for them).
    "admin.console.sample.interval.ms": "1000",
}
