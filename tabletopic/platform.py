"""Assembles one tabletopic node: every part is built with the parts it depends on, started in order
on one event loop and stopped in reverse order.

This module is the only place that knows every part. The parts are the fields of :class:`Node`, a
typed container, so a reader (and mypy) can follow who uses what; the few places where one part
speaks to another in that part's own terms (the table pipeline sees the broker through its
:class:`~tabletopic.table.ports.LocalBroker` port) are adapted here. See ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import APIRouter
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic import allocator, database, settings
from tabletopic.api import settings as admin_settings
from tabletopic.api.app import AdminApiComponent
from tabletopic.api.cluster_tables import TablePeers
from tabletopic.api.sources import ConsoleSources
from tabletopic.api.table_routes import tables_router
from tabletopic.broker import settings as broker_settings
from tabletopic.broker.component import BrokerComponent
from tabletopic.broker.leadership import Leadership
from tabletopic.broker.security.http_auth import BrokerHttpSecurity, https_client_options
from tabletopic.broker.topic_config_keys import TopicConfigExtension
from tabletopic.broker.topics import Topic
from tabletopic.broker.transactions.stable import CommittedOffsets
from tabletopic.catalog.component import CatalogComponent
from tabletopic.cluster import settings as cluster_settings
from tabletopic.cluster.db import ClusterMetadata
from tabletopic.cluster.single import SingleNodeLease
from tabletopic.component import Component
from tabletopic.config import (
    Config,
    ConfigError,
    LeftCluster,
    StartupError,
    make_private_dir,
    write_endpoints,
)
from tabletopic.ids import LeaderEpoch
from tabletopic.loop_watch import LoopWatch
from tabletopic.s3stream import settings as s3stream_settings
from tabletopic.s3stream.component import StorageComponent
from tabletopic.s3stream.config import shared_wal_path
from tabletopic.s3stream.shared_wal import incarnations
from tabletopic.s3stream.wal_fence import Role, WalFence
from tabletopic.schema_registry import settings as registry_settings
from tabletopic.schema_registry.component import RegistryComponent
from tabletopic.table import settings as table_settings
from tabletopic.table import table_config
from tabletopic.table.component import TableComponent
from tabletopic.table.lease import Lease, LeaseFenced, LeaseManager
from tabletopic.table.ports import PartitionView, SparkProvider, TopicView
from tabletopic.tasks import StallReport
from tabletopic.validation import schema_validation

if TYPE_CHECKING:
    from tabletopic.table.job import JobRunner
    from tabletopic.table.ops.duck import DuckSession

log = logging.getLogger(__name__)

# A node's stop takes a few seconds (a broker in a cluster hands its partitions off first, up to
# controlled.shutdown.timeout.ms, 10 s by default); past this it logs what it still waits on,
# which a supervisor's SIGKILL would otherwise leave unexplained.
SHUTDOWN_REPORT_S = 20.0
# An event loop blocked this long is logged with what it was running: past a heartbeat interval,
# requests queue up and timers (lease checks, session timeouts) run late.
LOOP_STALL_REPORT_S = 0.5


class BrokerTopics:
    """The broker adapted to the table pipeline's :class:`~tabletopic.table.ports.LocalBroker` port:
    topics in the pipeline's terms, the table-topic switch read here rather than in the broker."""

    def __init__(self, broker: BrokerComponent) -> None:
        self._broker = broker
        self._committed_offsets: CommittedOffsets | None = None  # built once the broker has started

    @property
    def node_id(self) -> int:
        return self._broker.service.node_id

    def client_config(self) -> dict[str, str]:
        return self._broker.service.own_client_config()

    def table_topics(self) -> list[TopicView]:
        """Table topics whose coordinator runs here: on the leader of partition 0 (every topic on a
        single node), so a cluster runs one coordinator per table topic."""
        leadership = self._broker.service.leadership
        return [
            _topic_view(topic, leadership)
            for topic in self._broker.service.topics.all()
            if topic.configs.get(table_config.ENABLE, "false").lower() == "true"
            and leadership.leads(topic.name, 0)
        ]

    def topic(self, name: str) -> TopicView | None:
        topic = self._broker.service.topics.get(name)
        return None if topic is None else _topic_view(topic, self._broker.service.leadership)

    # The pipeline's TransactionView: every partition's committed end, wherever it is led.
    async def last_stable_offsets(
        self, topic: TopicView, high_watermarks: Mapping[int, int]
    ) -> dict[int, int]:
        wanted = [
            (p.partition, p.stream_id, high_watermarks[p.partition])
            for p in topic.partitions
            if p.partition in high_watermarks
        ]
        return await self._committed().last_stable_offsets(topic.name, wanted)

    async def aborted_transactions(
        self, topic: TopicView, ranges: Mapping[int, tuple[int, int]]
    ) -> dict[int, list[tuple[int, int, int]]]:
        streams = {p.partition: p.stream_id for p in topic.partitions}
        wanted = [(p, streams[p], start, end) for p, (start, end) in ranges.items() if p in streams]
        return await self._committed().aborted_transactions(topic.name, wanted)

    async def upload_on_leaders(self, topic: TopicView) -> None:
        await self._committed().upload_on_leaders(topic.name, [p.partition for p in topic.partitions])

    def _committed(self) -> CommittedOffsets:
        if self._committed_offsets is None:
            self._committed_offsets = CommittedOffsets(self._broker.service)
        return self._committed_offsets


class PartitionZeroLeases:
    """Table coordinator leases in a cluster. The leader of a topic's partition 0 coordinates its
    table: it takes the topic's :class:`~tabletopic.table.lease.LeaseManager` lease with that
    partition's leader epoch as its claim (a newer leader takes over at once), and inside every
    commit, right before the catalog's commit request, it checks in the metadata database, on the
    database's clock, that this incarnation still leads partition 0 at that epoch with a valid node
    lease: a coordinator already deposed there does not commit. The catalog cannot join that
    database transaction, so one paused between the check and the request can still send it; the
    commit is conditional on the snapshot it planned against, which keeps the table exact then
    (``docs/cluster.md``, "The table commit's fence")."""

    def __init__(self, broker: BrokerComponent, meta: ClusterMetadata, owner: str, ttl_s: float) -> None:
        self._broker = broker
        self._meta = meta
        self._owner = owner
        self._ttl_s = ttl_s
        self._inner: LeaseManager | None = None  # built on first use (it migrates its table)
        self._claims: dict[str, LeaderEpoch] = {}

    def _leases(self) -> LeaseManager:
        if self._inner is None:
            self._inner = LeaseManager(self._meta.engine, self._owner, self._ttl_s)
        return self._inner

    def acquire(self, topic: str, now: float | None = None, claim: int = 0) -> Lease | None:
        role = self._broker.role
        held = None if role is None or role.node.fenced else role.opened.get((topic, 0))
        if held is None:
            return None
        lease = self._leases().acquire(topic, now, max(claim, held))
        if lease is not None:
            self._claims[topic] = held
        return lease

    def confirm(self, lease: Lease, now: float | None = None) -> Lease:
        lease = self._leases().confirm(lease, now)
        role = self._broker.role
        node = None if role is None else role.node
        claim = self._claims.get(lease.topic)
        if (
            node is None
            or claim is None
            or node.fenced
            or not self._meta.holds_leadership((lease.topic, 0), node.node_id, node.node_epoch, claim)
        ):
            raise LeaseFenced(
                f"table coordinator of {lease.topic} (partition 0 at leader epoch {claim}) was deposed"
            )
        return lease

    def release(self, lease: Lease) -> None:
        self._leases().release(lease)


def _topic_view(topic: Topic, leadership: Leadership) -> TopicView:
    """A broker topic in the table pipeline's terms (its explicit configs, partition -> stream, the
    leader epoch of partition 0 as the claim on the coordinator lease)."""
    return TopicView(
        name=topic.name,
        topic_id=str(topic.topic_id),
        configs=dict(topic.configs),
        partitions=tuple(PartitionView(i, s) for i, s in enumerate(topic.streams)),
        coordinator_claim=leadership.leader(topic.name, 0)[1],
    )


@dataclass
class Node:
    """The parts of one node, in start order."""

    storage: StorageComponent
    broker: BrokerComponent
    registry: RegistryComponent
    catalog: CatalogComponent
    tables: TableComponent
    admin: AdminApiComponent

    def in_start_order(self) -> tuple[Component, ...]:
        return (self.storage, self.broker, self.registry, self.catalog, self.tables, self.admin)


@dataclass
class Platform:
    """A node's configuration, shared resources and parts, and which parts have started."""

    config: Config
    engine: Engine
    metrics: CollectorRegistry
    node: Node
    started: list[Component] = field(default_factory=list)
    # A single node on PostgreSQL: the lease that keeps a second node off its database.
    single_lease: SingleNodeLease | None = None
    # Set when that lease was lost (another node took the database while this one stalled).
    lease_lost: asyncio.Event = field(default_factory=asyncio.Event)
    _renewal: asyncio.Task[None] | None = None

    @property
    def data_dir(self) -> Path:
        return self.config.data_dir

    @classmethod
    def create(cls, config: Config) -> Platform:
        """Build (not start) every part of a node from its configuration."""
        make_private_dir(config.data_dir)
        url = config.get(settings.METADATA_URL) or database.default_url(config.data_dir)
        # A transaction idle for two leases can only be a broker's the cluster counts as dead (its
        # writes are fenced): the database ends it and frees its locks.
        idle_ms = 2 * config.get(cluster_settings.SESSION_TIMEOUT_MS)
        engine = database.create_engine(url, idle_transaction_timeout_ms=idle_ms)
        clustered, single_lease = _check_cluster_mode(config, engine)
        metrics = CollectorRegistry()
        started: list[Component] = []
        storage = StorageComponent(config, engine, metrics, owned_only=clustered)
        broker = BrokerComponent(
            config,
            engine,
            metrics,
            storage,
            config_extensions=[
                TopicConfigExtension(
                    table_config.PREFIX,
                    table_config.validate_table_topic_configs,
                    # Late-bound: called on CreateTopics/AlterConfigs, once the node is started.
                    validate_topic=lambda name, configs: tables.check_topic_configs(name, configs),
                ),
                TopicConfigExtension(schema_validation.PREFIX, schema_validation.validate_topic_configs),
            ],
            clustered=clustered,
            # Late-bound: the registry starts after the broker; in cluster mode every node's
            # registry reads the shared metadata database, so each broker validates on its own.
            record_validator=schema_validation.SchemaValidator(
                lambda: registry.lookup,
                lambda schema_id: registry.registry.subjects_of(schema_id),
                config.get(table_settings.SCHEMA_VALIDATION_REFRESH_MS) / 1000,
            ),
        )
        http_security = BrokerHttpSecurity(config, engine)
        registry = RegistryComponent(
            config,
            engine,
            metrics,
            cluster_id=lambda: broker.service.cluster_id,
            http_security=http_security,
        )
        catalog = CatalogComponent(config, engine, http_security=http_security)
        runner, spark = _job_runner(config, catalog)
        registry_url = config.get(table_settings.SCHEMA_REGISTRY_URL) or config.get(
            registry_settings.LISTENER
        )
        tables = TableComponent(
            config,
            engine,
            metrics,
            broker=BrokerTopics(broker),
            storage=storage,
            catalog=catalog,
            runner=runner,
            spark=spark,
            registry_url=registry_url or None,
            leases=PartitionZeroLeases(
                broker,
                ClusterMetadata(engine),
                f"{socket.gethostname()}/broker-{config.get(broker_settings.BROKER_ID)}",
                config.get(table_settings.LEASE_TTL_MS) / 1000,
            )
            if clustered
            else None,
        )

        def routers() -> list[APIRouter]:
            served = [tables_router(tables.coordinator, peers)]
            if config.get(admin_settings.SQL_ENABLE):
                # `tabletopic sql` runs its statements in this warm session rather than its own,
                # and its DuckDB ones here too (the imports and the catalog are warm).
                from tabletopic.spark.sql_service import sql_router

                served.append(sql_router(spark, lambda fresh: _duck_session(config, catalog, fresh)))
            return served

        sources = ConsoleSources(
            metrics, broker, engine=engine, tables=tables, registry=registry, catalog=catalog
        )
        # Any broker answers for every table topic of the cluster, asking the broker coordinating it.
        sources.peers = peers = TablePeers(
            sources.broker_service, engine if clustered else None, https_client_options(config)
        )
        admin = AdminApiComponent(
            config,
            metrics,
            broker,
            parts=lambda: [part.name for part in started],
            routers=routers,
            sources=sources,
        )
        node = Node(storage, broker, registry, catalog, tables, admin)
        return cls(
            config=config,
            engine=engine,
            metrics=metrics,
            node=node,
            started=started,
            single_lease=single_lease,
        )

    async def start(self) -> None:
        from sqlalchemy.exc import OperationalError

        if self.single_lease is not None:
            self._renewal = asyncio.create_task(
                self._renew_single_lease(self.single_lease), name="single-lease"
            )
        for part in self.node.in_start_order():
            log.info("starting %s", part.name)
            try:
                await part.start()
            except OperationalError as exc:  # unreachable server, wrong password, unwritable file
                raise _database_unusable(self.engine, part.name, exc) from exc
            self.started.append(part)

    async def stop(self) -> None:
        while self.started:
            part = self.started.pop()
            log.info("stopping %s", part.name)
            try:
                await part.stop()
            except Exception:
                log.exception("error while stopping %s", part.name)
        if self._renewal is not None:
            self._renewal.cancel()
            self._renewal = None
        if self.single_lease is not None and not self.lease_lost.is_set():
            try:
                await asyncio.to_thread(self.single_lease.release)
            except Exception:
                log.exception("could not give back the single-node lease")
        self.engine.dispose()

    async def _renew_single_lease(self, lease: SingleNodeLease) -> None:
        """Renew the lease every heartbeat; if it was lost, say so and end the node (``serve``)."""
        interval = self.config.get(cluster_settings.HEARTBEAT_INTERVAL_MS) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                renewed = await asyncio.to_thread(lease.renew)
            except Exception as exc:  # a database outage: keep trying while the lease lasts
                log.warning("could not renew the single-node lease: %s", exc)
                continue
            if not renewed:
                log.error("another node took this node's metadata database; stopping")
                self.lease_lost.set()
                return


def _database_unusable(engine: Engine, who: str, exc: Exception) -> StartupError:
    """The one-line start-up error for a metadata database that cannot be reached or used."""
    url = engine.url.render_as_string(hide_password=True)
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    return StartupError(
        f"{who} cannot use the metadata database {url}: {reason}; change {settings.METADATA_URL.name}",
        settings.METADATA_URL.name,
    )


def _check_cluster_mode(config: Config, engine: Engine) -> tuple[bool, SingleNodeLease | None]:
    """Whether this node runs as a cluster broker, and the single-node lease it took if it runs alone
    on PostgreSQL. Refuses (ConfigError naming the key to change) a configuration that cannot be a
    cluster broker, a single node about to share a database another live node (a cluster's broker
    or another single node) holds, and a cluster broker about to share a single node's."""
    enabled = config.get(cluster_settings.ENABLE)
    postgres = engine.dialect.name == "postgresql"
    wal_mode = s3stream_settings.WalMode(config.get(s3stream_settings.WAL_MODE))
    object_wal = wal_mode is not s3stream_settings.WalMode.LOCAL  # object or shared: taken over
    if enabled and not postgres:
        raise ConfigError(
            "cluster.enable=true needs a PostgreSQL metadata database shared by every broker: "
            "set metadata.url=postgresql+psycopg://…"
        )
    if enabled and not object_wal:
        raise ConfigError(
            "cluster.enable=true needs s3stream.wal.mode=shared (with s3stream.wal.path on storage "
            "every broker reaches) or object: a local WAL would hold acknowledged data no other broker "
            "can take over"
        )
    if enabled and wal_mode is s3stream_settings.WalMode.SHARED:
        check_shared_wal_free(config, engine)
    if not postgres:
        return enabled, None
    from sqlalchemy.exc import OperationalError

    holder = f"{socket.gethostname()} pid {os.getpid()} ({config.data_dir})"
    lease = SingleNodeLease(engine, holder, config.get(cluster_settings.SESSION_TIMEOUT_MS) / 1000)
    try:
        # A single node takes the lease before anything opens a stream; a cluster broker only looks.
        others = lease.others() if enabled else lease.acquire()
    except OperationalError as exc:
        raise _database_unusable(engine, "the node", exc) from exc
    if enabled and others.single:
        raise ConfigError(
            f"the single node {others.single} (cluster.enable=false) holds this metadata database: "
            "stop it before starting cluster brokers on it, or use another metadata.url"
        )
    if not enabled and others.brokers:
        key = "cluster.enable=true" if object_wal else "s3stream.wal.mode=shared and cluster.enable=true"
        raise ConfigError(
            f"brokers {others.brokers} of a cluster are live in this metadata database: set {key} to "
            "join them, or use another metadata.url"
        )
    if not enabled and others.single:
        raise ConfigError(
            f"the single node {others.single} holds this metadata database: stop it, or set "
            "cluster.enable=true on every node to run them as one cluster, or use another metadata.url"
        )
    return enabled, None if enabled else lease


def check_shared_wal_free(config: Config, engine: Engine) -> None:
    """Refuse, in one line naming the key, to start on a shared WAL directory that a live broker
    writes: a process on this host that is still running, or a broker of that id on another host
    whose lease is valid (a broker killed there is taken over once its lease expires)."""
    node_id = int(config.get(broker_settings.BROKER_ID))
    node_directory = shared_wal_path(config) / str(node_id)
    here = socket.gethostname()
    for name in incarnations(node_directory):
        token = WalFence(node_directory / name).read()
        if token is None or token.role is not Role.WRITER or token.pid == os.getpid():
            continue
        if token.host == here:
            try:
                os.kill(token.pid, 0)
            except ProcessLookupError:
                continue  # that broker died: its WAL is taken back at start
            except PermissionError:
                pass  # alive, another user's
        elif node_id not in _live_brokers(engine):
            continue
        raise ConfigError(
            f"s3stream.wal.path: the shared WAL {node_directory / name} is written by the live "
            f"{token.describe()}: stop it, or give this broker another broker.id"
        )


def _live_brokers(engine: Engine) -> list[int]:
    return ClusterMetadata(engine).live_nodes_other_than(-1)


def _duck_session(config: Config, catalog: CatalogComponent, fresh: bool) -> DuckSession:
    """A DuckDB session over the node's catalog, with fresh reads of table topics if asked."""
    from tabletopic.spark.cli import fresh_rows
    from tabletopic.table.ops.duck import DuckSession

    return DuckSession(catalog.catalog, fresh_rows(config) if fresh else None)


def _job_runner(config: Config, catalog: CatalogComponent) -> tuple[JobRunner, SparkProvider | None]:
    """The configured ingest-job runner and, for the Spark runner, its session provider (Spark
    itself starts on the first job or warm-up, never here)."""
    kind = table_settings.JobRunnerKind(config.get(table_settings.RUNNER))
    if kind is table_settings.JobRunnerKind.INPROCESS:
        from tabletopic.table.ingest_task import InProcessRunner

        return InProcessRunner(), None
    from tabletopic.spark.ingest import SparkIngestRunner
    from tabletopic.spark.session import node_spark

    def spark() -> object:
        return node_spark(config, catalog)

    runner: JobRunner = SparkIngestRunner(spark, config.get(table_settings.MAX_TASKS) or None)
    if config.get(table_settings.LOCAL_MAX_BYTES) > 0:
        from tabletopic.table.job_process import SmallJobRunner

        runner = SmallJobRunner(runner, config.get(table_settings.LOCAL_MAX_BYTES))
    return runner, spark


async def serve(config: Config, started: asyncio.Event | None = None) -> None:
    """Run a node until SIGINT/SIGTERM."""
    allocator.tune_for_large_buffers()
    platform = Platform.create(config)
    # From here: building the platform above blocks the loop by design, with nothing yet to serve.
    watch = LoopWatch(LOOP_STALL_REPORT_S).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await platform.start()
        try:
            write_endpoints(config)  # for client commands given the same data directory
        except OSError as exc:
            log.warning("could not record this node's addresses in %s: %s", platform.data_dir, exc)
        log.info("tabletopic is up (data dir %s)", platform.data_dir)
        # What start-up built (modules, configs, caches) lives as long as the node: keep it out of
        # the cyclic collector, whose full passes over it took 20-80 ms, a latency spike each time.
        gc.collect()
        gc.freeze()
        if started is not None:
            started.set()
        role = platform.node.broker.role
        waits = {asyncio.create_task(stop.wait()), asyncio.create_task(platform.lease_lost.wait())}
        if role is not None:
            waits.add(asyncio.create_task(role.node.left.wait()))
            waits.add(asyncio.create_task(role.node.handing_over.wait()))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()
        if role is not None and (role.node.left.is_set() or role.node.handing_over.is_set()):
            # Raised before the stop below, which hands the partitions over unless the broker
            # left already (fenced, it leads nothing).
            raise LeftCluster(
                f"broker {role.node.node_id} left the cluster: {role.node.left_because}. Started "
                "again, it joins as a new incarnation."
            )
        if platform.lease_lost.is_set():
            raise StartupError(
                "another node took this single node's metadata database while it stalled; stopped so "
                "that two nodes never write the same streams (cluster.enable=false on a shared "
                f"{settings.METADATA_URL.name})",
                cluster_settings.ENABLE.name,
            )
        log.info("shutting down")
    finally:
        with StallReport("shutdown", SHUTDOWN_REPORT_S, log):
            await platform.stop()
        watch.stop()
