"""The parts a table coordinator runs on, without a broker or Spark: a real S3Stream store on local
objects, a real pyiceberg SQL catalog, the ingest task run in-process, and a topic directory the
test fills. The coordinator tests and the upsert model tests start the same parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.records.compression import Compression
from tabletopic.records.encoder import Record, build_batch
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.objectstore import LocalObjectStoreSpec, open_object_store
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.table.coordinator import CoordinatorContext
from tabletopic.table.ingest_task import InProcessRunner
from tabletopic.table.lease import LeaseManager
from tabletopic.table.ports import PartitionView, TopicView
from tabletopic.table.worker import TableWorker


@dataclass
class Directory:
    """The broker's topic directory, reduced to what the pipeline reads."""

    topics: dict[str, TopicView] = field(default_factory=dict)

    def table_topics(self) -> list[TopicView]:
        return [t for t in self.topics.values() if t.configs.get("automq.table.topic.enable") == "true"]

    def topic(self, name: str) -> TopicView | None:
        return self.topics.get(name)


@dataclass
class CoordinatorParts:
    engine: Engine
    store: S3StreamStore
    catalog: SqlCatalog
    directory: Directory
    ctx: CoordinatorContext

    async def close(self) -> None:
        await self.store.close()
        self.engine.dispose()


async def start_coordinator_parts(tmp_path: Path, schema_registry_url: str | None = None) -> CoordinatorParts:
    """The started store, the catalog and the coordinator's context (node "node-1"), all under
    ``tmp_path``; close them with :meth:`CoordinatorParts.close`."""
    engine = database.create_engine(database.default_url(tmp_path))
    objects = LocalObjectStoreSpec(root=str(tmp_path / "objects"))
    settings = StoreSettings(wal_mode="local", wal_dir=tmp_path / "wal", upload_interval_ms=100)
    store = S3StreamStore(settings, engine, open_object_store(objects))
    await store.start()
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    directory = Directory()
    ctx = CoordinatorContext(
        directory=directory,
        worker=TableWorker(store),
        catalog=catalog,
        runner=InProcessRunner(),
        leases=LeaseManager(engine, "node-1"),
        object_store_spec=objects,
        schema_registry_url=schema_registry_url,
    )
    return CoordinatorParts(engine, store, catalog, directory, ctx)


@dataclass
class Node:
    """The started parts, with the steps a test takes on them: add a table topic, produce to it."""

    store: S3StreamStore
    catalog: SqlCatalog
    directory: Directory
    ctx: CoordinatorContext

    async def add_topic(self, name: str, partitions: int, **configs: str) -> TopicView:
        views = [PartitionView(p, await self.store.create_stream()) for p in range(partitions)]
        base = {"automq.table.topic.enable": "true", "automq.table.topic.namespace": "kafka"}
        view = TopicView(name, f"id-{name}", {**base, **configs}, tuple(views))
        self.directory.topics[name] = view
        return view

    async def produce(self, view: TopicView, partition: int, values: list[bytes]) -> None:
        batch = build_batch([Record(b"k", v, [("h", b"1")]) for v in values], compression=Compression.LZ4)
        await self.store.append(view.partitions[partition].stream_id, batch, len(values))


def offsets_in_table(node: Node, name: str) -> list[tuple[int, int]]:
    rows = node.catalog.load_table(("kafka", name)).scan().to_arrow().column("_kafka_metadata").to_pylist()
    return sorted((r["partition"], r["offset"]) for r in rows)
