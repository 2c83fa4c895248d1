"""Table-topic status from the truth: rows, commits and the last commit read from the table's
snapshot summaries (a restarted node shows them before its first cycle), lag against the store's
live high watermark, and lag in seconds as the age of the oldest record not yet committed."""

from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, generate_latest

from tabletopic.records.encoder import Record, build_batch
from tabletopic.table.coordinator import PipelineStatus, TableCoordinator, TopicPipeline
from tabletopic.table.ops.lag import LiveLagCollector
from tabletopic.table.ops.status import COMMITS_PROPERTY, table_facts
from tests.support.table_coordinator import Node
from tests.support.waiting import wait_until

QUIET = {"automq.table.topic.commit.interval.ms": "900000", "automq.table.topic.convert.value.type": "string"}


async def test_a_restarted_coordinator_reports_rows_and_commits_from_the_table(node: Node) -> None:
    view = await node.add_topic("orders", 2, **QUIET)
    await node.produce(view, 0, [b"a", b"b", b"c"])
    await node.produce(view, 1, [b"d"])
    first = TopicPipeline(node.ctx, "orders")
    assert await first.run_cycle()
    await node.produce(view, 1, [b"e", b"f"])
    assert await first.run_cycle()
    table = node.catalog.load_table(("kafka", "orders"))
    facts = table_facts(table)
    assert (facts.rows, facts.commits) == (6, 2)
    assert table.metadata.current_snapshot().summary[COMMITS_PROPERTY] == "2"  # type: ignore[union-attr]
    assert (first.status.rows_committed, first.status.commits) == (6, 2)

    # A new process: its coordinator knows nothing until it reads the table.
    restarted = TableCoordinator(node.ctx)
    restarted.pipelines["orders"] = TopicPipeline(node.ctx, "orders")
    status = await restarted.live_status("orders")
    assert status is not None
    assert (status.rows_committed, status.commits) == (6, 2)
    assert status.last_commit_snapshot == facts.last_commit_snapshot
    assert status.last_commit_time is not None and abs(status.last_commit_time - time.time()) < 120
    assert status.table == "kafka.orders" and status.lag_records == 0
    # ... and a cycle finding nothing new keeps them (it reads them again from the table).
    again = restarted.pipelines["orders"]
    assert not await again.run_cycle()
    assert (again.status.commits, again.status.rows_committed) == (2, 6)


async def test_lag_before_the_first_commit_is_against_the_live_high_watermark(node: Node) -> None:
    view = await node.add_topic("waiting", 1, **QUIET)
    coordinator = TableCoordinator(node.ctx)
    await coordinator.run_due()  # first cycle at once: nothing yet; the next is 15 minutes away
    await node.produce(view, 0, [b"x"] * 1000)
    status = await coordinator.live_status("waiting")
    assert status is not None and status.commits == 0
    assert status.high_watermarks == {0: 1000}
    assert status.lag_records == 1000
    # The records were written just now: their age is seconds, not the pipeline's age.
    assert 0 <= status.lag_seconds < 60

    registry = CollectorRegistry()
    registry.register(LiveLagCollector(lambda: coordinator.pipelines, coordinator.refresh_watermarks))
    await node.produce(view, 0, [b"y"] * 5)  # the scrape sees these without any refresh
    text = generate_latest(registry).decode()
    assert 'tabletopic_table_lag_records{topic="waiting"} 1005.0' in text


async def test_lag_seconds_is_the_age_of_the_oldest_uncommitted_record(node: Node) -> None:
    view = await node.add_topic("aged", 1, **QUIET)
    coordinator = TableCoordinator(node.ctx)
    await coordinator.run_due()
    old = int(time.time() * 1000) - 300_000  # five minutes ago
    batch = build_batch([Record(b"k", b"old", (), None)], timestamp=old)
    await node.store.append(view.partitions[0].stream_id, batch, 1)
    await node.produce(view, 0, [b"new"])
    status = await coordinator.live_status("aged")
    assert status is not None and status.lag_records == 2
    assert 290 <= status.lag_seconds < 400
    coordinator.trigger("aged")
    await coordinator.run_due()
    status = await coordinator.live_status("aged")
    assert status is not None and status.lag_records == 0 and status.lag_seconds == 0.0
    assert status.rows_committed == 2 and status.commits == 1


def test_lag_seconds_is_zero_when_caught_up_and_counts_only_the_current_oldest_record() -> None:
    status = PipelineStatus(topic="t", table="default.t")
    status.high_watermarks = {0: 10, 1: 5}
    status.committed_offsets = {0: 10, 1: 5}
    status.oldest_waiting = {0: (4, 1_000)}  # stale: offset 4 is committed now
    assert status.lag_records == 0 and status.lag_seconds_at(2_000.0) == 0.0
    status.committed_offsets = {0: 4, 1: 5}
    assert status.lag_seconds_at(2_000.0) == 1_999.0
    status.log_starts = {0: 8}  # offsets below 8 were removed by retention
    assert status.lag_records == 2 and status.lag_seconds_at(2_000.0) == 0.0


async def test_a_commit_triggered_during_a_cycle_runs_right_after_it(node: Node) -> None:
    import asyncio

    from tabletopic.table.coordinator import CoordinatorContext
    from tabletopic.table.ingest_task import InProcessRunner
    from tabletopic.table.job import JobResult, JobSpec

    began = threading.Event()

    class SlowRunner(InProcessRunner):
        def run(self, spec: JobSpec) -> JobResult:
            began.set()
            time.sleep(0.5)  # the subject: a job that takes a while, so the trigger lands inside it
            return super().run(spec)

    ctx = CoordinatorContext(**{**node.ctx.__dict__, "runner": SlowRunner()})
    view = await node.add_topic("triggered", 1, **QUIET)
    await node.produce(view, 0, [b"first"])
    coordinator = TableCoordinator(ctx)
    await coordinator.run_due(wait=False)  # a cycle starts (its job takes 0.5 s)
    await wait_until(began.is_set, message="the job runs")
    await node.produce(view, 0, [b"second"])
    coordinator.trigger("triggered")  # `tables commit` while that cycle runs
    await asyncio.gather(*coordinator._running.values())
    await coordinator.run_due()  # the trigger was not lost: a second cycle commits "second"
    status = await coordinator.live_status("triggered")
    assert status is not None and status.rows_committed == 2 and status.lag_records == 0
