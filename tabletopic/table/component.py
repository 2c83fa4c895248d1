"""``TableComponent``: the table coordinator, worker and maintenance inside ``tabletopic serve``.

It is built with what it needs from the rest of the node, each in the table pipeline's own terms:
the local broker through the :class:`~tabletopic.table.ports.LocalBroker` port, the stream store,
the catalog, and the job runner with its Spark session provider (both ``None``-able: the in-process
runner needs no Spark). The assembly (:mod:`tabletopic.platform`) adapts and wires them, so this
package imports neither the broker nor the Spark runners.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.catalog.component import CatalogComponent
from tabletopic.catalog.settings import CATALOG_NAME
from tabletopic.component import Started
from tabletopic.config import Config
from tabletopic.s3stream.component import StorageComponent
from tabletopic.table import settings, table_config
from tabletopic.table.convert.rows import FailedRecord
from tabletopic.table.coordinator import CoordinatorContext, Maintenance, TableCoordinator, TopicPipeline
from tabletopic.table.ingest_task import warm_worker
from tabletopic.table.job import JobRunner
from tabletopic.table.keep_warm import WorkerKeeper
from tabletopic.table.key_index import KeyCache
from tabletopic.table.lease import CoordinatorLeases, LeaseManager
from tabletopic.table.metrics import TableMetrics
from tabletopic.table.ops.lag import LiveLagCollector
from tabletopic.table.ports import LocalBroker, SparkProvider, TransactionView
from tabletopic.table.worker import TableWorker

log = logging.getLogger(__name__)


@dataclass(eq=False)
class TableComponent:
    """The table pipeline of one node.

    Args:
        broker: the local broker (topics, node id, listener).
        storage: the started stream store's component (object slices for the workers).
        catalog: the started catalog's component.
        runner: where ingest jobs run.
        spark: the Spark session of the runner, or None when jobs run without Spark (then no
            background warm-up and no compaction).
        registry_url: the schema registry the jobs decode with, None for none.
        leases: who coordinates which topic; None for time-based leases in the metadata database
            (one node); in a cluster the assembly passes the partition-0 leadership.
    """

    name = "table topics"

    config: Config
    engine: Engine
    metrics: CollectorRegistry
    broker: LocalBroker
    storage: StorageComponent
    catalog: CatalogComponent
    runner: JobRunner
    spark: SparkProvider | None
    registry_url: str | None
    leases: CoordinatorLeases | None = None
    _coordinator: TableCoordinator | None = field(default=None, init=False)
    _warmup: asyncio.Task[None] | None = field(default=None, init=False)
    _warm_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _warm_started: bool = field(default=False, init=False)
    _keeper: WorkerKeeper | None = field(init=False)
    _producer: Any = field(default=None, init=False)
    _lag_collector: LiveLagCollector[TopicPipeline] | None = field(default=None, init=False)

    coordinator = Started[TableCoordinator]("table coordinator")

    def __post_init__(self) -> None:
        self._keeper = WorkerKeeper(self.spark) if self.spark is not None else None

    async def start(self) -> None:
        config = self.config
        ctx = CoordinatorContext(
            directory=self.broker,
            worker=TableWorker(
                self.storage.store,
                config.get(settings.MAX_TASK_BYTES),
                self.broker if isinstance(self.broker, TransactionView) else None,
            ),
            catalog=self.catalog.catalog,
            runner=self.runner,
            leases=self.leases
            or LeaseManager(
                self.engine,
                f"{socket.gethostname()}/broker-{self.broker.node_id}",
                config.get(settings.LEASE_TTL_MS) / 1000,
            ),
            object_store_spec=self.storage.object_store_spec,
            schema_registry_url=self.registry_url,
            dead_letters=self._dead_letters,
            observer=TableMetrics(self.metrics),
            maintenance=self._maintenance(),
            spark_catalog=config.get(CATALOG_NAME),
            native_decode=config.get(settings.NATIVE_DECODE),
            key_cache=KeyCache(config.get(settings.UPSERT_KEY_CACHE_BYTES)),
            max_task_bytes=config.get(settings.MAX_TASK_BYTES),
            upsert_max_cycle_bytes=config.get(settings.UPSERT_MAX_CYCLE_BYTES),
        )
        coordinator = TableCoordinator(
            ctx,
            poll_interval=config.get(settings.POLL_INTERVAL_MS) / 1000,
            max_concurrent=config.get(settings.MAX_CONCURRENT_JOBS),
        )
        coordinator.start()
        self._coordinator = coordinator
        self._lag_collector = LiveLagCollector(lambda: coordinator.pipelines, coordinator.refresh_watermarks)
        self.metrics.register(self._lag_collector)
        if self.spark is not None and self.broker.table_topics():
            # Restarting with table topics: start Spark and its Python workers now, in the
            # background, so the first commit after a restart does not pay for them.
            self._warm_started = True
            self._warmup = asyncio.create_task(asyncio.to_thread(self._warm_spark), name="spark-warmup")

    def check_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        """CreateTopics/AlterConfigs checks needing the node's state (other table topics, the
        table's schema): see :func:`tabletopic.table.tables.check_topic_configs`. Raises ValueError."""
        from tabletopic.table.tables import check_topic_configs

        catalog = self.catalog.catalog if self._coordinator is not None else None
        check_topic_configs(topic, configs, self.broker.table_topics(), catalog)
        if configs.get(table_config.ENABLE, "").strip().lower() == "true":
            self._warm_in_background()

    def _warm_in_background(self) -> None:
        """Start Spark and its Python workers the first time a table topic is created or switched
        on, so its first commit does not wait for them (they stay up, kept warm by
        :class:`~tabletopic.table.keep_warm.WorkerKeeper`: about 1 GB for the driver JVM and two
        Python workers with the pipeline's imports, on local[2])."""
        with self._warm_lock:
            if self.spark is None or self._warm_started:
                return
            self._warm_started = True
        threading.Thread(target=self._warm_spark, name="spark-warmup", daemon=True).start()

    def _warm_spark(self) -> None:
        assert self.spark is not None
        try:
            started = time.monotonic()
            warm_helper = getattr(self.runner, "warm", None)
            if warm_helper is not None:
                # First the helper process for small jobs (tabletopic.table.job_process), ready in
                # a second or two: a new topic's first commits are small and run there.
                warm_helper()
            spark = self.spark()
            # One task per core, each importing what an ingest task imports, so every Python
            # worker a job will reuse is started and has paid its imports; shaped as an ingest job
            # (a local DataFrame of item rows through mapInArrow), so the JVM's side of that path is
            # warm too.
            slots = max(int(spark.sparkContext.defaultParallelism), 1)
            frame = spark.createDataFrame([("[]",)] * slots, "item string")
            frame.mapInArrow(warm_worker, "item string").collect()
            log.info("Spark warmed up for the table pipeline in %.1fs", time.monotonic() - started)
            if self._keeper is not None:
                self._keeper.start()  # Spark stops Python workers idle for a minute
        except Exception:
            log.exception("Spark warm-up failed (the first ingest job will start Spark itself)")

    def _maintenance(self) -> Maintenance:
        from tabletopic.table.ops.maintenance import MaintenanceSchedule, TableMaintenance

        config = self.config
        schedule = MaintenanceSchedule(
            compaction=config.get(settings.COMPACTION_INTERVAL_MS) / 1000,
            delete_merge=config.get(settings.DELETE_MERGE_INTERVAL_MS) / 1000,
            orphan_cleanup=config.get(settings.ORPHAN_CLEANUP_INTERVAL_MS) / 1000,
            orphan_min_age=config.get(settings.ORPHAN_MIN_AGE_MS) / 1000,
        )
        return TableMaintenance(schedule, self.spark, config.get(CATALOG_NAME))

    async def _dead_letters(self, dlq_topic: str, source_topic: str, records: list[FailedRecord]) -> None:
        """Write skipped records to the dead-letter topic through this broker's own listener (logged
        in as the broker itself), with headers saying why; waits until every record is
        acknowledged."""
        client_config = self.broker.client_config()

        def send() -> None:
            from confluent_kafka import Producer

            if self._producer is None:
                self._producer = Producer({**client_config, "enable.idempotence": True, "linger.ms": 5})
            failures: list[str] = []

            def delivered(err: Any, _msg: Any) -> None:
                if err is not None:
                    failures.append(str(err))

            for record in records:
                self._producer.produce(
                    dlq_topic,
                    key=record.key,
                    value=record.value,
                    headers=record.dlq_headers(source_topic),
                    on_delivery=delivered,
                )
            remaining = self._producer.flush(30)
            if remaining or failures:
                raise RuntimeError(
                    f"dead-letter topic {dlq_topic}: {remaining} unsent, errors {failures[:3]}"
                )

        await asyncio.to_thread(send)

    async def stop(self) -> None:
        if self._warmup is not None and not self._warmup.done():
            self._warmup.cancel()
        if self._keeper is not None:
            self._keeper.stop()
        if self._lag_collector is not None:
            self.metrics.unregister(self._lag_collector)
            self._lag_collector = None
        if self._coordinator is not None:
            await self._coordinator.stop()
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 5)
        close_runner = getattr(self.runner, "close", None)
        if close_runner is not None:
            await asyncio.to_thread(close_runner)
