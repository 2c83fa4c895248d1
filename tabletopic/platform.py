"""Assembles one tabletopic node: every part is built with the parts it depends on, started in order
on one event loop and stopped in reverse order.

This module is the only place that knows every part. The parts are the fields of :class:`Node`, a
typed container, so a reader (and mypy) can follow who uses what; the few places where one part
speaks to another in that part's own terms (the table pipeline sees the broker through its
:class:`~tabletopic.table.ports.LocalBroker` port) are adapted here. See ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import APIRouter
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic import database, settings
from tabletopic.admin.app import AdminApiComponent
from tabletopic.broker.component import BrokerComponent
from tabletopic.broker.topic_config_keys import TopicConfigExtension
from tabletopic.broker.topics import Topic
from tabletopic.catalog.component import CatalogComponent
from tabletopic.component import Component
from tabletopic.config import Config
from tabletopic.s3stream.component import StorageComponent
from tabletopic.schema_registry import settings as registry_settings
from tabletopic.schema_registry.component import RegistryComponent
from tabletopic.table import settings as table_settings
from tabletopic.table import table_config
from tabletopic.table.admin_routes import tables_router
from tabletopic.table.component import TableComponent
from tabletopic.table.ports import PartitionView, SparkProvider, TopicView

if TYPE_CHECKING:
    from tabletopic.table.job import JobRunner

log = logging.getLogger(__name__)


class BrokerTopics:
    """The broker adapted to the table pipeline's :class:`~tabletopic.table.ports.LocalBroker` port:
    topics in the pipeline's terms, the table-topic switch read here rather than in the broker."""

    def __init__(self, broker: BrokerComponent) -> None:
        self._broker = broker

    @property
    def node_id(self) -> int:
        return self._broker.service.node_id

    def bootstrap_servers(self) -> str:
        endpoint = self._broker.service.advertised_for(None)
        return f"{endpoint.host}:{endpoint.port}"

    def table_topics(self) -> list[TopicView]:
        return [
            _topic_view(topic)
            for topic in self._broker.service.topics.all()
            if topic.configs.get(table_config.ENABLE, "false").lower() == "true"
        ]

    def topic(self, name: str) -> TopicView | None:
        topic = self._broker.service.topics.get(name)
        return None if topic is None else _topic_view(topic)


def _topic_view(topic: Topic) -> TopicView:
    """A broker topic in the table pipeline's terms (its explicit configs, partition -> stream)."""
    return TopicView(
        name=topic.name,
        topic_id=str(topic.topic_id),
        configs=dict(topic.configs),
        partitions=tuple(PartitionView(i, s) for i, s in enumerate(topic.streams)),
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

    @property
    def data_dir(self) -> Path:
        return self.config.data_dir

    @classmethod
    def create(cls, config: Config) -> Platform:
        """Build (not start) every part of a node from its configuration."""
        config.data_dir.mkdir(parents=True, exist_ok=True)
        url = config.get(settings.METADATA_URL) or database.default_url(config.data_dir)
        engine = database.create_engine(url)
        metrics = CollectorRegistry()
        started: list[Component] = []
        storage = StorageComponent(config, engine, metrics)
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
                )
            ],
        )
        registry = RegistryComponent(config, engine, metrics, cluster_id=lambda: broker.service.cluster_id)
        catalog = CatalogComponent(config, engine)
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
        )

        def routers() -> list[APIRouter]:
            return [tables_router(tables.coordinator)]

        admin = AdminApiComponent(
            config, metrics, broker, parts=lambda: [part.name for part in started], routers=routers
        )
        node = Node(storage, broker, registry, catalog, tables, admin)
        return cls(config=config, engine=engine, metrics=metrics, node=node, started=started)

    async def start(self) -> None:
        for part in self.node.in_start_order():
            log.info("starting %s", part.name)
            await part.start()
            self.started.append(part)

    async def stop(self) -> None:
        while self.started:
            part = self.started.pop()
            log.info("stopping %s", part.name)
            try:
                await part.stop()
            except Exception:
                log.exception("error while stopping %s", part.name)
        self.engine.dispose()


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

    return SparkIngestRunner(spark, config.get(table_settings.MAX_TASKS) or None), spark


async def serve(config: Config, started: asyncio.Event | None = None) -> None:
    """Run a node until SIGINT/SIGTERM."""
    platform = Platform.create(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await platform.start()
        log.info("tabletopic is up (data dir %s)", platform.data_dir)
        if started is not None:
            started.set()
        await stop.wait()
        log.info("shutting down")
    finally:
        await platform.stop()
