"""``TableComponent``: the table coordinator, worker and maintenance inside ``tabletopic serve``.

Publishes ``platform.services["table_config_validator"]`` (the broker validates table-topic configs
on CreateTopics/AlterConfigs with it) and ``platform.services["table_coordinator"]``, and adds the
``/v1/tables`` routes to the admin API.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import TYPE_CHECKING, Any

from tabletopic.catalog.settings import CATALOG_NAME
from tabletopic.table import settings
from tabletopic.table.convert.rows import FailedRecord
from tabletopic.table.coordinator import CoordinatorContext, TableCoordinator
from tabletopic.table.ingest_task import InProcessRunner
from tabletopic.table.lease import LeaseManager
from tabletopic.table.metrics import TableMetrics
from tabletopic.table.table_config import validate_table_topic_configs
from tabletopic.table.worker import TableWorker

if TYPE_CHECKING:
    from tabletopic.platform import Platform

log = logging.getLogger(__name__)


class TableComponent:
    name = "table topics"

    def __init__(self) -> None:
        self.coordinator: TableCoordinator | None = None
        self._warmup: asyncio.Task[None] | None = None
        self._producer: Any = None
        self._bootstrap = ""

    async def start(self, platform: Platform) -> None:
        platform.services["table_config_validator"] = validate_table_topic_configs
        config = platform.config
        broker = platform.services["broker"]
        registry_url = config.get(settings.SCHEMA_REGISTRY_URL) or config.get("schema.registry.listener")
        bootstrap = broker.advertised_for(None)
        self._bootstrap = f"{bootstrap.host}:{bootstrap.port}"
        ctx = CoordinatorContext(
            directory=broker,
            worker=TableWorker(platform.services["streams"], config.get(settings.MAX_TASK_BYTES)),
            catalog=platform.services["catalog"],
            runner=self._runner(platform),
            leases=LeaseManager(
                platform.engine,
                f"{socket.gethostname()}/broker-{broker.node_id}",
                config.get(settings.LEASE_TTL_MS) / 1000,
            ),
            object_store_settings=platform.services["object_store_settings"],
            schema_registry_url=registry_url or None,
            dead_letters=self._dead_letters,
            observer=TableMetrics(platform.metrics),
            maintenance=self._maintenance(platform),
            spark_catalog=config.get(CATALOG_NAME),
        )
        self.coordinator = TableCoordinator(
            ctx,
            poll_interval=config.get(settings.POLL_INTERVAL_MS) / 1000,
            max_concurrent=config.get(settings.MAX_CONCURRENT_JOBS),
        )
        self.coordinator.start()
        platform.services["table_coordinator"] = self.coordinator
        if config.get(settings.RUNNER) == "spark" and broker.table_topics():
            # Restarting with table topics: start Spark and its Python workers now, in the
            # background, so the first commit after a restart does not pay for them.
            self._warmup = asyncio.create_task(
                asyncio.to_thread(self._warm_spark, platform), name="spark-warmup"
            )
        from tabletopic.table.admin_routes import tables_router

        platform.services.setdefault("admin_routers", []).append(tables_router(self.coordinator))

    def _runner(self, platform: Platform) -> Any:
        if platform.config.get(settings.RUNNER) == "inprocess":
            return InProcessRunner()
        from tabletopic.spark.ingest import SparkIngestRunner

        return SparkIngestRunner(
            lambda: self._spark(platform), platform.config.get(settings.MAX_TASKS) or None
        )

    @staticmethod
    def _spark(platform: Platform) -> Any:
        from tabletopic.spark.session import platform_spark

        return platform_spark(platform)

    def _warm_spark(self, platform: Platform) -> None:
        try:
            spark = self._spark(platform)
            spark.range(2).mapInArrow(lambda batches: batches, "id long").collect()
            log.info("Spark warmed up for the table pipeline")
        except Exception:
            log.exception("Spark warm-up failed (the first ingest job will start Spark itself)")

    def _maintenance(self, platform: Platform) -> Any:
        from tabletopic.table.maintenance import compact, expire_snapshots

        interval = platform.config.get(settings.COMPACTION_INTERVAL_MS) / 1000
        spark_enabled = platform.config.get(settings.RUNNER) == "spark"
        catalog_name = platform.config.get(CATALOG_NAME)
        last_compaction: dict[str, float] = {}

        def run(table: Any, config: Any) -> None:
            expire_snapshots(table, config)
            if not interval or not spark_enabled:
                return
            name = ".".join(table.name())
            now = time.monotonic()
            if now - last_compaction.setdefault(name, now) >= interval:
                last_compaction[name] = now
                compact(lambda: self._spark(platform), catalog_name, table)

        return run

    async def _dead_letters(self, dlq_topic: str, source_topic: str, records: list[FailedRecord]) -> None:
        """Write skipped records to the dead-letter topic through this broker's own listener, with
        headers saying why; waits until every record is acknowledged."""

        def send() -> None:
            from confluent_kafka import Producer

            if self._producer is None:
                self._producer = Producer(
                    {"bootstrap.servers": self._bootstrap, "enable.idempotence": True, "linger.ms": 5}
                )
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
        if self.coordinator is not None:
            await self.coordinator.stop()
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 5)
