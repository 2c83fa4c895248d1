"""High watermarks as the leaders answer them: one leader that hangs leaves the other leaders'
figures standing.

The admin client here is a stand-in that answers as librdkafka does: ListOffsets is fanned out to
every leader a call spans, and the call's result is delivered only when all of them answered, so a
call that spans a hung leader times out for every partition it asked (rdkafka_admin.c fails the
fan-out op as a whole on its timeout). The real client's path is in tests/cluster/test_cluster_view.py.
"""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from tabletopic import leader_offsets

HUNG_LEADER = 2
LEADERS = {("t", 0): 1, ("t", 1): HUNG_LEADER, ("t", 2): 3, ("t", 3): 1}


class FanOutAdmin:
    """Metadata naming :data:`LEADERS`; ListOffsets answering 50 + partition, unless the call spans
    the hung leader, whose calls never complete."""

    def __init__(self) -> None:
        self.calls: list[set[tuple[str, int]]] = []

    def list_topics(self, timeout: float) -> Any:
        partitions = {p: SimpleNamespace(leader=leader) for (_, p), leader in LEADERS.items()}
        return SimpleNamespace(topics={"t": SimpleNamespace(partitions=partitions)})

    def list_offsets(
        self, asked: dict[TopicPartition, Any], request_timeout: float
    ) -> dict[Any, Future[Any]]:
        keys = {(tp.topic, tp.partition) for tp in asked}
        self.calls.append(keys)
        spans_hung_leader = any(LEADERS[key] == HUNG_LEADER for key in keys)
        futures: dict[Any, Future[Any]] = {}
        for tp in asked:
            future: Future[Any] = Future()
            if not spans_hung_leader:
                future.set_result(SimpleNamespace(offset=50 + tp.partition))
            futures[tp] = future
        return futures


def test_a_hung_leader_leaves_out_only_its_own_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FanOutAdmin()
    monkeypatch.setattr(leader_offsets, "admin_client", lambda config: admin)
    answers = leader_offsets.leader_high_watermarks({}, list(LEADERS), timeout=0.3)
    assert answers == {("t", 0): 50, ("t", 2): 52, ("t", 3): 53}
    assert sorted(map(sorted, admin.calls)) == [[("t", 0), ("t", 3)], [("t", 1)], [("t", 2)]]


def test_no_partitions_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FanOutAdmin()
    monkeypatch.setattr(leader_offsets, "admin_client", lambda config: admin)
    assert leader_offsets.leader_high_watermarks({}, []) == {}
    assert admin.calls == []
