"""Pausing a table topic's pipeline (the console's and the admin API's pause/resume buttons)."""

from __future__ import annotations

from tabletopic.table.coordinator import PipelineState, TableCoordinator
from tests.table.test_coordinator import Node, node  # noqa: F401 - the coordinator tests' fixture


async def test_a_paused_topic_commits_nothing_until_resumed(node: Node) -> None:  # noqa: F811
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
