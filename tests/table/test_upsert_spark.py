"""Upsert through the coordinator with the real Spark runner (tasks stage the rows, the coordinator
commits position deletes and the latest rows with the offsets in one snapshot), read back by
pyiceberg and by Spark SQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tabletopic import database
from tabletopic.records.encoder import Record, build_batch
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.objectstore import LocalObjectStoreSpec, open_object_store
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.table.commit import committed_state
from tabletopic.table.coordinator import CoordinatorContext, TopicPipeline
from tabletopic.table.lease import LeaseManager
from tabletopic.table.ports import PartitionView, TopicView
from tabletopic.table.worker import TableWorker

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class OneTopic:
    def __init__(self, view: TopicView) -> None:
        self.view = view

    def table_topics(self) -> list[TopicView]:
        return [self.view]

    def topic(self, name: str) -> TopicView | None:
        return self.view if name == self.view.name else None


@dataclass
class UsersTable:
    """The upsert table topic ``users`` (keyed by ``_kafka_key``, string values) over local streams,
    its pipeline running Spark jobs, and the catalog it commits to."""

    store: S3StreamStore
    streams: list[int]
    pipeline: TopicPipeline
    catalog: Any
    namespace: str
    spark_name: str  # the table's name in Spark SQL

    async def produce(self, partition: int, pairs: list[tuple[bytes, bytes | None]]) -> None:
        await self.store.append(
            self.streams[partition], build_batch([Record(k, v) for k, v in pairs]), len(pairs)
        )

    def table(self) -> Any:
        return self.catalog.load_table((self.namespace, "users"))

    def rows(self) -> dict[str, str]:
        data = self.table().scan().to_arrow()
        keys = data.column("_kafka_key").to_pylist()
        assert len(keys) == len(set(keys)), "two rows for one key"
        return dict(zip(keys, data.column("_kafka_value").to_pylist(), strict=True))


@asynccontextmanager
async def users_table(
    tmp_path: Path, spark: Any, make_catalog: Any, partitions: int, **runner: Any
) -> AsyncIterator[UsersTable]:
    from tabletopic.catalog.adapters import spark_catalog_conf
    from tabletopic.spark.ingest import SparkIngestRunner
    from tabletopic.spark.session import register_catalogs

    handle = make_catalog()
    catalog_name = f"upsert_{uuid.uuid4().hex[:6]}"
    register_catalogs(spark, spark_catalog_conf(catalog_name, handle.spark_properties()))
    engine = database.create_engine(database.default_url(tmp_path))
    objects = LocalObjectStoreSpec(root=str(tmp_path / "objects"))
    store = S3StreamStore(
        StoreSettings(wal_mode="local", wal_dir=tmp_path / "wal"), engine, open_object_store(objects)
    )
    await store.start()
    try:
        streams = [await store.create_stream() for _ in range(partitions)]
        namespace = f"ns_{uuid.uuid4().hex[:6]}"
        view = TopicView(
            "users",
            "tid",
            {
                "automq.table.topic.enable": "true",
                "automq.table.topic.namespace": namespace,
                "automq.table.topic.convert.value.type": "string",
                "automq.table.topic.upsert.enable": "true",
                "automq.table.topic.id.columns": "[_kafka_key]",
            },
            tuple(PartitionView(p, s) for p, s in enumerate(streams)),
        )
        ctx = CoordinatorContext(
            directory=OneTopic(view),
            worker=TableWorker(store),
            catalog=handle.backing,
            runner=SparkIngestRunner(lambda: spark, **runner),
            leases=LeaseManager(engine, "node"),
            object_store_spec=objects,
            schema_registry_url=None,
            spark_catalog=catalog_name,
        )
        pipeline = TopicPipeline(ctx, "users")
        yield UsersTable(
            store, streams, pipeline, handle.backing, namespace, f"{catalog_name}.{namespace}.users"
        )
    finally:
        await store.close()
        engine.dispose()


def spark_rows(spark: Any, users: UsersTable) -> dict[str, str]:
    return {
        r[0]: r[1] for r in spark.sql(f"SELECT _kafka_key, _kafka_value FROM {users.spark_name}").collect()
    }


async def test_upsert_keeps_the_latest_row_per_key_and_commits_offsets_in_the_same_snapshot(
    tmp_path: Path, spark: Any, make_catalog: Any
) -> None:
    async with users_table(tmp_path, spark, make_catalog, partitions=1) as users:
        pipeline = users.pipeline
        await users.produce(0, [(b"k1", b"a"), (b"k2", b"b"), (b"k1", b"c")])
        assert await pipeline.run_cycle(), pipeline.status.last_error
        assert users.rows() == {"k1": "c", "k2": "b"}
        await users.produce(0, [(b"k2", b"d"), (b"k3", b"e"), (b"k1", None)])  # the tombstone deletes k1
        assert await pipeline.run_cycle(), pipeline.status.last_error
        assert users.rows() == {"k2": "d", "k3": "e"}
        table = users.table()
        assert committed_state(table).offsets == {0: 6}
        # The offsets rode in the upsert's own snapshots: one snapshot per cycle, no extra empty append.
        assert len(table.snapshots()) == 2
        assert all("tabletopic.offsets" in s.summary.additional_properties for s in table.snapshots())
        assert spark_rows(spark, users) == {"k2": "d", "k3": "e"}


async def test_an_update_and_a_tombstone_in_one_spark_task_commit_on_an_upsert_table(
    tmp_path: Path, spark: Any, make_catalog: Any
) -> None:
    # Issue 30: 1,000 rows, then key 7 updated and key 8 deleted in one cycle put the topic in
    # FAILED ("column _kafka_key is string in one schema version and large_string in another"):
    # the task cast the tombstone's rows to the table's Arrow types and not the update's. One task
    # (table.job.max.tasks=1) takes both partitions' items, as the node's helper process does.
    async with users_table(tmp_path, spark, make_catalog, partitions=2, max_tasks=1) as users:
        pipeline = users.pipeline
        for partition in range(2):
            await users.produce(partition, [(b"%d" % i, b"v%d" % i) for i in range(partition, 1000, 2)])
        assert await pipeline.run_cycle(), pipeline.status.last_error
        # Updates in both partitions, the tombstone beside one of them (the 100 updates and
        # 2 tombstones): a partition's rows with a delete were cast, the other's were not.
        await users.produce(1, [(b"7", b"seven")])
        await users.produce(0, [(b"6", b"six"), (b"8", None)])
        assert await pipeline.run_cycle(), pipeline.status.last_error
        expected = {str(i): f"v{i}" for i in range(1000) if i != 8} | {"6": "six", "7": "seven"}
        assert users.rows() == expected
        assert committed_state(users.table()).offsets == {0: 502, 1: 501}
        assert spark_rows(spark, users) == expected


async def test_upserts_whose_data_manifests_merged_read_the_same_in_pyiceberg_and_spark(
    tmp_path: Path, spark: Any, make_catalog: Any
) -> None:
    """Upsert commits merge their data manifests too (delete manifests stay apart): deletes still
    find the rows they delete by each file's sequence number, in both readers."""
    async with users_table(tmp_path, spark, make_catalog, partitions=1) as users:
        pipeline = users.pipeline
        await users.produce(0, [(b"k%d" % i, b"v0") for i in range(5)])
        assert await pipeline.run_cycle(), pipeline.status.last_error
        with users.table().transaction() as setting:
            setting.set_properties({"commit.manifest.min-count-to-merge": "2"})
        expected = {f"k{i}": "v0" for i in range(5)}
        for round_ in range(1, 7):
            updated, deleted = f"k{round_ % 5}", f"k{(round_ + 2) % 5}"
            await users.produce(0, [(updated.encode(), b"v%d" % round_), (deleted.encode(), None)])
            expected[updated] = f"v{round_}"
            expected.pop(deleted, None)
            assert await pipeline.run_cycle(), pipeline.status.last_error
        snapshot = users.table().current_snapshot()
        assert snapshot is not None
        data_manifests = [m for m in snapshot.manifests(users.table().io) if m.content == 0]
        assert len(data_manifests) < 7, len(data_manifests)
        assert users.rows() == expected
        assert spark_rows(spark, users) == expected
