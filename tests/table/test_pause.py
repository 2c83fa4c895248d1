"""Pausing a table topic's pipeline (the console's and the admin API's pause/resume buttons), and
resuming a FAILED one."""

from __future__ import annotations

import pytest

from tabletopic.table.coordinator import CoordinatorContext, PipelineState, TableCoordinator
from tabletopic.table.job import JobResult, JobSpec
from tests.support.table_coordinator import Node, offsets_in_table


async def test_a_paused_topic_commits_nothing_until_resumed(node: Node) -> None:
    view = await node.add_topic("paused", 1)
    coordinator = TableCoordinator(node.ctx)
    await node.produce(view, 0, [b"a"])
    await coordinator.run_due()
    assert coordinator.pipelines["paused"].status.rows_committed == 1
    coordinator.pause("paused")
    await node.produce(view, 0, [b"b", b"c"])
    coordinator.trigger("paused")
    await coordinator.run_due()
    status = coordinator.pipelines["paused"].status
    assert status.rows_committed == 1 and status.state is PipelineState.PAUSED
    coordinator.resume("paused")
    await coordinator.run_due()
    assert coordinator.pipelines["paused"].status.rows_committed == 3
    assert coordinator.pipelines["paused"].status.state is not PipelineState.PAUSED


async def test_pausing_during_a_cycle_reads_paused_once_the_cycle_ends_not_idle(node: Node) -> None:
    import asyncio

    view = await node.add_topic("paused-midway", 1)
    coordinator = TableCoordinator(node.ctx)
    await node.produce(view, 0, [b"a"])
    await coordinator.run_due(wait=False)
    running = coordinator._running["paused-midway"]
    assert not running.done()
    coordinator.pause("paused-midway")
    await asyncio.wait_for(asyncio.shield(running), 60)
    await asyncio.sleep(0)  # done callbacks run on the next loop turn
    assert coordinator.pipelines["paused-midway"].status.state is PipelineState.PAUSED


class FailsOnce:
    """A runner whose first job hits a fatal error (a cause outside the topic's configs)."""

    def __init__(self) -> None:
        from tabletopic.table.ingest_task import InProcessRunner

        self.inner = InProcessRunner()
        self.failed = False

    def run(self, spec: JobSpec) -> JobResult:
        if not self.failed:
            self.failed = True
            return JobResult(fatal_error="the cause, gone after this job")
        return self.inner.run(spec)


async def test_resume_lets_a_failed_topic_try_again_now_and_commit_every_record_once(node: Node) -> None:
    view = await node.add_topic("failing", 1)
    coordinator = TableCoordinator(CoordinatorContext(**{**node.ctx.__dict__, "runner": FailsOnce()}))
    await node.produce(view, 0, [b"a", b"b"])
    await coordinator.run_due()
    status = coordinator.pipelines["failing"].status
    assert status.state is PipelineState.FAILED and status.last_error == "the cause, gone after this job"
    coordinator.trigger("failing")  # `tables commit` alone does not lift a failure
    await coordinator.run_due()
    assert status.state is PipelineState.FAILED and status.rows_committed == 0
    coordinator.resume("failing")  # `tables resume`, the admin API's and the console's resume
    await coordinator.run_due()
    assert status.state is PipelineState.RUNNING and status.last_error is None
    assert offsets_in_table(node, "failing") == [(0, 0), (0, 1)]


def test_tables_pause_and_resume_post_to_the_nodes_admin_api(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx
    from typer.testing import CliRunner

    from tabletopic.table.cli import app

    calls: list[tuple[str, str]] = []

    def request(method: str, url: str, **_options: object) -> httpx.Response:
        calls.append((method, url))
        return httpx.Response(200, json={})

    monkeypatch.setattr(httpx, "request", request)
    for command in ("pause", "resume"):
        result = CliRunner().invoke(app, ["--admin-url", "http://node:8080", command, "orders"])
        assert result.exit_code == 0, result.output
    assert calls == [
        ("POST", "http://node:8080/v1/tables/orders/pause"),
        ("POST", "http://node:8080/v1/tables/orders/resume"),
    ]
