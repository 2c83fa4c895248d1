"""The coordinator end to end without Spark: real S3Stream store, real pyiceberg catalog, batches
from a real client library, the ingest task run in-process. (The Spark path has its own tests.)"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from tabletopic.records.encoder import Record, build_batch
from tabletopic.table.commit import committed_state
from tabletopic.table.coordinator import CoordinatorContext, TableCoordinator, TopicPipeline
from tabletopic.table.ingest_task import InProcessRunner
from tabletopic.table.job import JobResult, JobSpec
from tabletopic.table.ports import TopicView
from tabletopic.table.worker import TableWorker
from tests.support.table_coordinator import Node, offsets_in_table
from tests.support.waiting import wait_until


async def test_a_cycle_commits_every_record_once_with_offsets_in_the_snapshot(node: Node) -> None:
    view = await node.add_topic("orders", 2, **{"automq.table.topic.convert.value.type": "string"})
    await node.produce(view, 0, [b"a", b"b", b"c"])
    await node.produce(view, 1, [b"d"])
    pipeline = TopicPipeline(node.ctx, "orders")
    assert await pipeline.run_cycle()
    table = node.catalog.load_table(("kafka", "orders"))
    assert offsets_in_table(node, "orders") == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert sorted(table.scan().to_arrow().column("_kafka_value").to_pylist()) == ["a", "b", "c", "d"]
    assert committed_state(table).offsets == {0: 3, 1: 1}
    # Nothing new: nothing committed, no new snapshot.
    assert not await pipeline.run_cycle()
    await node.produce(view, 1, [b"e", b"f"])
    assert await pipeline.run_cycle()
    assert offsets_in_table(node, "orders")[-2:] == [(1, 1), (1, 2)]
    assert pipeline.status.rows_committed == 6 and pipeline.status.lag_records == 0


async def test_a_restarted_coordinator_resumes_from_the_table_not_from_memory(node: Node) -> None:
    view = await node.add_topic("clicks", 1)
    await node.produce(view, 0, [b"1", b"2"])
    assert await TopicPipeline(node.ctx, "clicks").run_cycle()
    await node.produce(view, 0, [b"3"])
    fresh = TopicPipeline(node.ctx, "clicks")  # a new process knows nothing but the table
    assert await fresh.run_cycle()
    assert offsets_in_table(node, "clicks") == [(0, 0), (0, 1), (0, 2)]


class CrashAfterWrite:
    """A job whose driver dies after the files are written but before the commit: the commit never
    happens, the next run must redo the range once."""

    def __init__(self) -> None:
        self.inner = InProcessRunner()
        self.crashed = False

    def run(self, spec: JobSpec) -> JobResult:
        result = self.inner.run(spec)
        if not self.crashed and result.data_files:
            self.crashed = True
            raise RuntimeError("driver killed")
        return result


async def test_a_job_that_dies_before_commit_is_redone_exactly_once(node: Node) -> None:
    view = await node.add_topic("payments", 1)
    await node.produce(view, 0, [b"x", b"y"])
    runner = CrashAfterWrite()
    ctx = CoordinatorContext(**{**node.ctx.__dict__, "runner": runner})
    coordinator = TableCoordinator(ctx)
    await coordinator.run_due()  # the crash is caught and reported, the cycle retried next time
    assert "driver killed" in (coordinator.pipelines["payments"].status.last_error or "")
    coordinator.trigger()
    await coordinator.run_due()
    assert offsets_in_table(node, "payments") == [(0, 0), (0, 1)]


async def test_a_stale_coordinator_does_not_commit_twice(node: Node) -> None:
    view = await node.add_topic("audit", 1)
    await node.produce(view, 0, [b"1"])
    first = TopicPipeline(node.ctx, "audit")
    assert await first.run_cycle()
    await node.produce(view, 0, [b"2"])

    # Two pipelines plan the same range; only the first commit may land.
    class Racing:
        def __init__(self) -> None:
            self.inner = InProcessRunner()

        def run(self, spec: JobSpec) -> JobResult:
            result = self.inner.run(spec)
            if not getattr(self, "raced", False):
                self.raced = True
                other = CoordinatorContext(**{**node.ctx.__dict__, "runner": InProcessRunner()})
                asyncio.run(TopicPipeline(other, "audit").run_cycle())
            return result

    racing = CoordinatorContext(**{**node.ctx.__dict__, "runner": Racing()})
    assert not await TopicPipeline(racing, "audit").run_cycle()  # StalePlan: nothing committed
    assert offsets_in_table(node, "audit") == [(0, 0), (0, 1)]


async def test_poison_records_are_skipped_under_invalid_data_and_stop_the_topic_under_none(
    node: Node,
) -> None:
    # by_schema_id and values not in Confluent wire format: every value is undecodable.
    lenient = await node.add_topic("lenient", 1, **{"automq.table.topic.convert.value.type": "by_schema_id"})
    strict = await node.add_topic(
        "strict",
        1,
        **{
            "automq.table.topic.convert.value.type": "by_schema_id",
            "automq.table.topic.errors.tolerance": "none",
        },
    )
    await node.produce(lenient, 0, [b"not avro"])
    await node.produce(strict, 0, [b"not avro"])
    skipped = TopicPipeline(node.ctx, "lenient")
    await skipped.run_cycle()
    assert skipped.status.records_skipped == 1
    stopped = TopicPipeline(node.ctx, "strict")
    assert not await stopped.run_cycle()
    assert stopped.status.state == "FAILED" and "offset 0" in (stopped.status.last_error or "")


async def test_a_topic_commits_before_its_interval_once_enough_bytes_wait(node: Node) -> None:
    view = await node.add_topic(
        "bursty",
        1,
        **{
            "automq.table.topic.commit.interval.ms": "900000",
            "automq.table.topic.commit.max.bytes": str(1 << 20),
        },
    )
    coordinator = TableCoordinator(node.ctx)
    await node.produce(view, 0, [os.urandom(20_000)])
    await coordinator.run_due()  # first cycle: due at once, learns the bytes per record
    assert coordinator.pipelines["bursty"].status.rows_committed == 1
    await node.produce(view, 0, [os.urandom(20_000) for _ in range(5)])
    await coordinator.run_due()  # interval far away and few bytes waiting: nothing runs
    assert coordinator.pipelines["bursty"].status.rows_committed == 1
    await node.produce(view, 0, [os.urandom(20_000) for _ in range(60)])
    await coordinator.run_due()  # over commit.max.bytes: commits now
    assert coordinator.pipelines["bursty"].status.rows_committed == 66


class SlowRunner:
    """An in-process job that takes ``seconds`` longer, like a Spark job's fixed cost."""

    def __init__(self, seconds: float) -> None:
        self.inner = InProcessRunner()
        self.seconds = seconds

    def run(self, spec: JobSpec) -> JobResult:
        time.sleep(self.seconds)  # the subject: a job's fixed cost
        return self.inner.run(spec)


async def test_the_next_cycle_is_due_one_interval_after_the_last_one_began(node: Node) -> None:
    """Commits come every commit interval: a cycle's own length is not added to the wait."""
    view = await node.add_topic("ticks", 1, **{"automq.table.topic.commit.interval.ms": "1000"})
    coordinator = TableCoordinator(dataclasses.replace(node.ctx, runner=SlowRunner(0.4)))
    await node.produce(view, 0, [b"x"])
    began = time.monotonic()
    await coordinator.run_due()
    assert coordinator.pipelines["ticks"].status.rows_committed == 1
    assert time.monotonic() - began >= 0.4
    assert coordinator._next_run["ticks"] <= began + 1.0 + 0.1


async def test_the_coordinator_wakes_when_a_cycle_is_due_not_only_every_poll(node: Node) -> None:
    """A commit interval shorter than the poll interval still commits every interval."""
    view = await node.add_topic("beats", 1, **{"automq.table.topic.commit.interval.ms": "200"})
    coordinator = TableCoordinator(node.ctx, poll_interval=30.0)
    await node.produce(view, 0, [b"1"])
    coordinator.start()
    try:
        status = coordinator.pipelines

        def committed(rows: int) -> bool:
            return "beats" in status and status["beats"].status.rows_committed == rows

        await wait_until(lambda: committed(1), interval=0.05, message="the first row committed")
        await node.produce(view, 0, [b"2"])
        # 10 s at most: well under the 30 s poll.
        await wait_until(lambda: committed(2), interval=0.05, message="the second row committed")
    finally:
        # Stopped between cycles, not inside one (a cycle cancelled mid-step leaves its thread
        # running against the store the fixture then closes).
        coordinator.pause("beats")
        await wait_until(lambda: not coordinator._running_now(), interval=0.05, message="between cycles")
        await coordinator.stop()


async def test_a_commit_racing_a_schema_evolution_is_not_applied_twice(node: Node) -> None:
    import pyarrow as pa

    view = await node.add_topic("raced", 1, **{"automq.table.topic.convert.value.type": "string"})
    await node.produce(view, 0, [b"1"])
    assert await TopicPipeline(node.ctx, "raced").run_cycle()
    await node.produce(view, 0, [b"2"])

    class StaleWriterThenNewColumn:
        """While this job runs a stale coordinator commits the same range, and the job reports a
        new column, so the coordinator evolves (and reloads) the table before committing."""

        def __init__(self) -> None:
            self.inner = InProcessRunner()
            self.calls = 0

        def run(self, spec: JobSpec) -> JobResult:
            self.calls += 1
            result = self.inner.run(spec)
            if self.calls == 1:
                stale = CoordinatorContext(**{**node.ctx.__dict__, "runner": InProcessRunner()})
                assert asyncio.run(TopicPipeline(stale, "raced").run_cycle())
                table = node.catalog.load_table(("kafka", "raced"))
                schema = table.schema().as_arrow().append(pa.field("extra", pa.string()))
                return JobResult(needs_schema=schema)
            return result

    racing = CoordinatorContext(**{**node.ctx.__dict__, "runner": StaleWriterThenNewColumn()})
    assert not await TopicPipeline(racing, "raced").run_cycle()
    assert offsets_in_table(node, "raced") == [(0, 0), (0, 1)]


class SchemaOnly:
    """A job that reports decoded rows of a fixed schema (a flattened value with ``id``, ``at``)."""

    def __init__(self) -> None:
        self.inner = InProcessRunner()

    def run(self, spec: JobSpec) -> JobResult:
        import pyarrow as pa

        from tabletopic.table.tables import BASE_SCHEMA

        if spec.table_metadata_json is None:
            return JobResult(
                needs_schema=pa.schema([("id", pa.int64()), ("at", pa.timestamp("us")), *BASE_SCHEMA])
            )
        return JobResult()


async def test_partition_by_on_a_missing_column_puts_the_topic_in_error_at_the_first_commit(
    node: Node,
) -> None:
    await node.add_topic(
        "events",
        1,
        **{
            "automq.table.topic.partition.by": "[day(nosuch), id]",
            "automq.table.topic.convert.value.type": "by_schema_id",
            "automq.table.topic.transform.value.type": "flatten",
        },
    )
    view = node.directory.topics["events"]
    await node.produce(view, 0, [b"x"])
    ctx = CoordinatorContext(**{**node.ctx.__dict__, "runner": SchemaOnly()})
    pipeline = TopicPipeline(ctx, "events")
    assert not await pipeline.run_cycle()
    assert pipeline.status.state == "FAILED"
    error = pipeline.status.last_error or ""
    assert "automq.table.topic.partition.by" in error and "day(nosuch)" in error and "id, at" in error
    assert not node.catalog.table_exists(("kafka", "events"))  # never created unpartitioned


async def test_two_topics_mapping_to_one_table_never_share_it(node: Node) -> None:
    first = await node.add_topic("orders-eu", 1)
    second = await node.add_topic("orders.eu", 1)
    await node.produce(first, 0, [b"a"])
    await node.produce(second, 0, [b"b"])
    later = TopicPipeline(node.ctx, "orders.eu")
    owner = TopicPipeline(node.ctx, "orders-eu")  # the first by name while the table has no offsets
    assert not await later.run_cycle()
    assert later.status.state == "FAILED"
    assert "orders-eu" in (later.status.last_error or "")
    assert "automq.table.topic.table.name" in (later.status.last_error or "")
    assert await owner.run_cycle()
    assert offsets_in_table(node, "orders_eu") == [(0, 0)]  # only the owner's record


def test_creating_or_altering_a_topic_checks_its_table_name_and_partition_columns(tmp_path: Path) -> None:
    from tabletopic.table.tables import check_topic_configs

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    on = {"automq.table.topic.enable": "true"}
    existing = [TopicView("orders-eu", "id-1", on, ())]
    with pytest.raises(ValueError, match=r"orders-eu already writes table default\.orders_eu.*table\.name"):
        check_topic_configs("orders_eu", on, existing, catalog)
    check_topic_configs("orders_eu", {**on, "automq.table.topic.table.name": "orders_eu2"}, existing, catalog)
    check_topic_configs("orders_eu", {"automq.table.topic.enable": "false"}, existing, catalog)

    import pyarrow as pa

    from tabletopic.table.tables import BASE_SCHEMA

    catalog.create_namespace("default")
    catalog.create_table(("default", "clicks"), pa.schema([("page", pa.string()), *BASE_SCHEMA]))
    flatten = {
        **on,
        "automq.table.topic.convert.value.type": "by_schema_id",
        "automq.table.topic.transform.value.type": "flatten",
    }
    check_topic_configs("clicks", {**flatten, "automq.table.topic.partition.by": "[page]"}, [], catalog)
    with pytest.raises(ValueError, match=r"partition\.by: day\(nosuch\) .*columns: page"):
        check_topic_configs(
            "clicks", {**flatten, "automq.table.topic.partition.by": "[day(nosuch)]"}, [], catalog
        )


class Recording:
    """The in-process runner, remembering what each job was asked to do."""

    def __init__(self) -> None:
        self.inner = InProcessRunner()
        self.specs: list[JobSpec] = []

    def run(self, spec: JobSpec) -> JobResult:
        self.specs.append(spec)
        return self.inner.run(spec)


async def test_a_first_backlog_is_decoded_once_after_a_probe_of_its_first_records(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tabletopic.table import coordinator
    from tabletopic.table.coordinator import PROBE_RECORDS

    view = await node.add_topic("backlog", 1, **{"automq.table.topic.convert.value.type": "string"})
    total = PROBE_RECORDS + 2000
    for start in range(0, total, 500):
        await node.produce(view, 0, [b"v%d" % i for i in range(start, start + 500)])
    probes = Recording()
    monkeypatch.setattr(coordinator, "InProcessRunner", lambda: probes)
    runner = Recording()
    pipeline = TopicPipeline(CoordinatorContext(**{**node.ctx.__dict__, "runner": runner}), "backlog")
    assert await pipeline.run_cycle()
    # The probe ran in this process, not as a job; one job decoded the backlog once.
    [probe] = probes.specs
    [full] = runner.specs
    assert probe.table_metadata_json is None and not probe.native_decode
    assert [(i.start_offset, i.end_offset) for i in probe.items] == [(0, PROBE_RECORDS)]
    # Only the slices holding the first records are read.
    assert probe.items[0].slices[-1].end_offset >= PROBE_RECORDS
    assert probe.items[0].size <= full.items[0].size
    assert full.table_metadata_json is not None and full.items[-1].end_offset == total
    assert pipeline.status.rows_committed == total
    assert len(offsets_in_table(node, "backlog")) == total


async def test_upsert_without_spark_keeps_the_latest_row_per_key_and_deletes_on_tombstones(
    node: Node,
) -> None:
    view = await node.add_topic(
        "users",
        2,
        **{
            "automq.table.topic.convert.value.type": "string",
            "automq.table.topic.upsert.enable": "true",
            "automq.table.topic.id.columns": "[_kafka_key]",
        },
    )

    async def produce(partition: int, pairs: list[tuple[bytes, bytes | None]]) -> None:
        batch = build_batch([Record(k, v) for k, v in pairs])
        await node.store.append(view.partitions[partition].stream_id, batch, len(pairs))

    def rows() -> dict[str, str]:
        data = node.catalog.load_table(("kafka", "users")).scan().to_arrow()
        keys = data.column("_kafka_key").to_pylist()
        assert len(keys) == len(set(keys)), keys
        return dict(zip(keys, data.column("_kafka_value").to_pylist(), strict=True))

    pipeline = TopicPipeline(node.ctx, "users")
    await produce(0, [(b"k1", b"a"), (b"k2", b"b"), (b"k1", b"c"), (b"k3", b"x")])
    await produce(1, [(b"k4", b"d")])
    assert await pipeline.run_cycle(), pipeline.status.last_error
    assert rows() == {"k1": "c", "k2": "b", "k3": "x", "k4": "d"}
    # A tombstone deletes; a delete then a re-insert in one batch keeps the insert.
    await produce(0, [(b"k2", None), (b"k3", None), (b"k3", b"again"), (b"k1", b"e")])
    assert await pipeline.run_cycle(), pipeline.status.last_error
    assert rows() == {"k1": "e", "k3": "again", "k4": "d"}
    # Re-inserting a key deleted by an earlier commit.
    await produce(1, [(b"k2", b"back")])
    assert await pipeline.run_cycle(), pipeline.status.last_error
    assert rows() == {"k1": "e", "k2": "back", "k3": "again", "k4": "d"}
    table = node.catalog.load_table(("kafka", "users"))
    assert committed_state(table).offsets == {0: 8, 1: 2}
    assert len(table.snapshots()) == 3
    assert pipeline.status.rows_committed == 4


async def test_a_task_writes_its_rows_out_in_files_once_they_pass_max_task_bytes(node: Node) -> None:
    # table.job.max.task.bytes bounds the decoded rows a task holds: past it they go to a data file,
    # so one item bigger than the bound ends up in several files, every record exactly once.
    node.ctx = CoordinatorContext(**{**node.ctx.__dict__, "max_task_bytes": 128 << 10})
    view = await node.add_topic("wide", 1, **{"automq.table.topic.convert.value.type": "string"})
    pipeline = TopicPipeline(node.ctx, "wide")
    await node.produce(view, 0, [b"first"])
    assert await pipeline.run_cycle()  # creates the table
    for _ in range(6):  # 60 values of 10 KB that LZ4 cannot shrink much: ~600 KB stored
        await node.produce(view, 0, [os.urandom(5000).hex().encode() for _ in range(10)])
    assert await pipeline.run_cycle()
    assert offsets_in_table(node, "wide") == [(0, o) for o in range(61)]
    table = node.catalog.load_table(("kafka", "wide"))
    files = [task.file for task in table.scan().plan_files()]
    assert len(files) >= 3  # the first cycle's file, then at least two for the second


async def test_an_upsert_backlog_is_committed_over_cycles_capped_by_max_cycle_bytes(node: Node) -> None:
    view = await node.add_topic(
        "capped",
        2,
        **{
            "automq.table.topic.convert.value.type": "string",
            "automq.table.topic.upsert.enable": "true",
            "automq.table.topic.id.columns": "[_kafka_key]",
        },
    )
    for round_ in range(3):  # three flushed objects per partition: three slices, three items each
        for partition in range(2):
            batch = build_batch([Record(b"k%d-%d" % (partition, i), b"v%d" % round_) for i in range(50)])
            await node.store.append(view.partitions[partition].stream_id, batch, 50)
        await node.store.flush([p.stream_id for p in view.partitions])
    ctx = CoordinatorContext(
        **{
            **node.ctx.__dict__,
            "worker": TableWorker(node.store, max_item_bytes=1),
            "upsert_max_cycle_bytes": 1,
        }
    )
    pipeline = TopicPipeline(ctx, "capped")
    assert await pipeline.run_cycle(), pipeline.status.last_error
    # One item (the cap) was taken: one partition moved by one object, the other not at all.
    first = committed_state(node.catalog.load_table(("kafka", "capped"))).offsets
    assert sorted(first.values()) == [0, 50] and pipeline.more_ready
    cycles = 1
    while pipeline.more_ready:
        assert await pipeline.run_cycle(), pipeline.status.last_error
        cycles += 1
    assert cycles == 6
    table = node.catalog.load_table(("kafka", "capped"))
    assert committed_state(table).offsets == {0: 150, 1: 150}
    data = table.scan().to_arrow()
    assert sorted(data.column("_kafka_key").to_pylist()) == sorted(
        f"k{p}-{i}" for p in range(2) for i in range(50)
    )
    assert set(data.column("_kafka_value").to_pylist()) == {"v2"}


def test_capping_takes_partitions_in_turn_and_ends_ranges_where_the_kept_items_end() -> None:
    from tabletopic.s3stream.streams import ObjectSlice
    from tabletopic.table.worker import PartitionRange, WorkItem, cap_items

    def item(partition: int, start: int) -> WorkItem:
        return WorkItem(
            "t", partition, start, start + 10, (ObjectSlice("o", 0, 100, partition, start, start + 10),)
        )

    ranges = [PartitionRange(0, 0, 30), PartitionRange(1, 0, 20), PartitionRange(2, 5, 5, lost=5)]
    items = [item(0, 0), item(0, 10), item(0, 20), item(1, 0), item(1, 10)]
    capped, kept, more = cap_items(ranges, items, 300)
    assert more and kept == [item(0, 0), item(1, 0), item(0, 10)]
    assert capped == [PartitionRange(0, 0, 20), PartitionRange(1, 0, 10), PartitionRange(2, 5, 5, lost=5)]
    assert cap_items(ranges, items, 1)[1] == [item(0, 0)]  # at least one item
    assert cap_items(ranges, items, 10_000) == (ranges, items, False)


class CountingRunner:
    """The large-job runner (Spark in a node): counts the jobs it was given."""

    def __init__(self) -> None:
        self.inner = InProcessRunner()
        self.jobs = 0

    def run(self, spec: JobSpec) -> JobResult:
        self.jobs += 1
        return self.inner.run(spec)


async def test_small_jobs_run_in_the_warm_helper_process_and_large_ones_on_the_large_runner(
    node: Node,
) -> None:
    from tabletopic.table.job_process import SmallJobRunner

    large = CountingRunner()
    runner = SmallJobRunner(large, max_bytes=4096)
    pipeline = TopicPipeline(dataclasses.replace(node.ctx, runner=runner), "mixed")
    view = await node.add_topic("mixed", 1, **{"automq.table.topic.convert.value.type": "string"})
    try:
        await asyncio.to_thread(runner.warm)
        first = runner.helper.pid()
        assert first is not None and first != os.getpid()
        await node.produce(view, 0, [b"a", b"b"])
        assert await pipeline.run_cycle()  # small: in the helper
        assert large.jobs == 0
        await node.produce(view, 0, [os.urandom(3000).hex().encode()])
        assert await pipeline.run_cycle()  # over max_bytes: the large runner
        assert large.jobs == 1
        os.kill(first, 9)  # a helper that died is started again for the next small job
        await asyncio.to_thread(os.waitpid, first, 0)
        await node.produce(view, 0, [b"c"])
        assert await pipeline.run_cycle()
        assert large.jobs == 1 and runner.helper.pid() not in (None, first)
        assert offsets_in_table(node, "mixed") == [(0, 0), (0, 1), (0, 2), (0, 3)]
        assert pipeline.status.rows_committed == 4
    finally:
        await asyncio.to_thread(runner.close)
    assert runner.helper.pid() is None


async def test_a_helper_killed_during_a_job_has_that_job_rerun_on_the_large_runner_exactly_once(
    node: Node,
) -> None:
    from tabletopic.table.job_process import SmallJobRunner

    large = CountingRunner()
    runner = SmallJobRunner(large, max_bytes=1 << 20)
    pipeline = TopicPipeline(dataclasses.replace(node.ctx, runner=runner), "killed")
    view = await node.add_topic("killed", 1, **{"automq.table.topic.convert.value.type": "string"})
    try:
        await asyncio.to_thread(runner.warm)
        helper = runner.helper.pid()
        assert helper is not None
        await node.produce(view, 0, [b"a", b"b", b"c"])
        os.kill(helper, signal.SIGSTOP)  # the job is handed over and stays in flight ...
        cycle = asyncio.create_task(pipeline.run_cycle())
        await asyncio.sleep(0.5)  # the subject: watching that the cycle does not end while the helper hangs
        assert not cycle.done() and large.jobs == 0
        os.kill(helper, signal.SIGKILL)  # ... until the helper dies under it
        assert await asyncio.wait_for(cycle, 30)
        assert large.jobs == 1  # rerun on the large runner, in the same cycle
        await node.produce(view, 0, [b"d"])
        assert await pipeline.run_cycle()  # and a new helper for the next small job
        assert large.jobs == 1 and runner.helper.pid() not in (None, helper)
        assert offsets_in_table(node, "killed") == [(0, 0), (0, 1), (0, 2), (0, 3)]
        assert pipeline.status.rows_committed == 4
    finally:
        await asyncio.to_thread(runner.close)


@pytest.mark.parametrize("how", ["resume", "backoff", "config"])
async def test_a_failed_table_topic_resumes_from_its_committed_offsets_once_its_cause_is_gone(
    node: Node, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    import json

    from tabletopic.schema_registry import client
    from tabletopic.table import coordinator
    from tabletopic.table.coordinator import PipelineState
    from tests.support.schemas import MemoryLookup, wire

    lookup = MemoryLookup()
    monkeypatch.setattr(client, "HttpSchemaLookup", lambda _url: lookup)
    if how == "backoff":
        monkeypatch.setattr(coordinator, "FAILED_RETRY_S", 0.0)
    v1 = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    first = lookup.register("events-value", "JSON", v1)
    ctx = CoordinatorContext(**{**node.ctx.__dict__, "schema_registry_url": "http://registry.invalid"})
    view = await node.add_topic(
        "events",
        1,
        **{
            "automq.table.topic.convert.value.type": "by_schema_id",
            "automq.table.topic.transform.value.type": "flatten",
            "automq.table.topic.errors.tolerance": "none",
        },
    )
    pipeline = TopicPipeline(ctx, "events")
    await node.produce(view, 0, [wire(first, json.dumps({"id": 0}).encode())])
    assert await pipeline.run_cycle(), pipeline.status.last_error
    # A record written with a schema version the registry does not have (yet): under
    # errors.tolerance=none the pipeline stops, committing nothing of the cycle.
    second = first + 1
    await node.produce(
        view,
        0,
        [wire(first, b'{"id": 1}'), wire(second, b'{"id": 2, "note": "n"}'), wire(first, b'{"id": 3}')],
    )
    assert not await pipeline.run_cycle()
    assert pipeline.status.state is PipelineState.FAILED and "schema id 2" in (
        pipeline.status.last_error or ""
    )
    table = node.catalog.load_table(("kafka", "events"))
    assert committed_state(table).offsets == {0: 1}
    v2 = {**v1, "properties": {**v1["properties"], "note": {"type": "string"}}}
    assert lookup.register("events-value", "JSON", v2) == second  # the new version arrives
    if how == "resume":
        assert not await pipeline.run_cycle()  # unchanged configs: waits for its backoff...
        pipeline.resume()  # ...or an operator
    elif how == "config":
        view = dataclasses.replace(
            view, configs={**view.configs, "automq.table.topic.commit.interval.ms": "500"}
        )
        node.directory.topics["events"] = view
    assert await pipeline.run_cycle(), pipeline.status.last_error
    assert pipeline.status.state is PipelineState.RUNNING and pipeline.status.last_error is None
    rows = node.catalog.load_table(("kafka", "events")).scan().to_arrow()
    assert sorted(rows.column("id").to_pylist()) == [0, 1, 2, 3]  # each record once
    assert offsets_in_table(node, "events") == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert committed_state(node.catalog.load_table(("kafka", "events"))).offsets == {0: 4}


async def test_a_failed_table_topic_that_fails_again_backs_off_longer_each_time(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tabletopic.table import coordinator
    from tabletopic.table.coordinator import FAILED_RETRY_MAX_S, FAILED_RETRY_S, PipelineState

    clock = [1000.0]
    monkeypatch.setattr(coordinator.time, "monotonic", lambda: clock[0])
    view = await node.add_topic(
        "bad",
        1,
        **{"automq.table.topic.convert.value.type": "string", "automq.table.topic.errors.tolerance": "none"},
    )
    await node.produce(view, 0, [b"\xff"])  # not UTF-8: fails under errors.tolerance=none
    pipeline = TopicPipeline(node.ctx, "bad")
    delays = []
    for _ in range(7):
        started = clock[0]
        assert not await pipeline.run_cycle()
        assert pipeline.status.state is PipelineState.FAILED
        assert not await pipeline.run_cycle()  # no job before the backoff is over
        delays.append(pipeline._retry_at - started)
        clock[0] = pipeline._retry_at
    assert delays[0] == FAILED_RETRY_S and delays[1] == 2 * FAILED_RETRY_S
    assert delays[-1] == FAILED_RETRY_MAX_S
    pipeline.resume()  # an operator's resume retries now and starts the backoff over
    started = clock[0]
    assert not await pipeline.run_cycle()
    assert pipeline._retry_at - started == FAILED_RETRY_S


async def test_a_setting_that_makes_the_tables_metadata_heavy_is_said_once_with_the_key_to_raise(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    """A day of one-second commits of 40 partitions' offsets: about 59 MB of metadata, rewritten at
    every commit. Logged at the first cycle, not at every one, and kept in the topic's status."""
    view = await node.add_topic(
        "wide",
        40,
        **{
            "automq.table.topic.convert.value.type": "string",
            "automq.table.topic.commit.interval.ms": "1000",
            "automq.table.topic.expire.snapshot.older.than.hours": "24",
        },
    )
    pipeline = TopicPipeline(node.ctx, "wide")
    for value in (b"a", b"b"):
        await node.produce(view, 0, [value])
        assert await pipeline.run_cycle()
    said = [r.getMessage() for r in caplog.records if "written whole at every commit" in r.getMessage()]
    assert len(said) == 1 and "86,400 snapshots" in said[0], said
    assert "automq.table.topic.commit.interval.ms" in said[0]
    # Shown where the table's state is (the console's table page, `tables describe`), not only logged.
    assert said[0].endswith(pipeline.status.as_dict()["warning"])
