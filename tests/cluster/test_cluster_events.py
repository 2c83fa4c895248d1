"""The cluster timeline's reasons, read from what the controller planned from (pure), and the
table that keeps them (PostgreSQL)."""

from __future__ import annotations

import pytest

from tabletopic import database
from tabletopic.cluster import events
from tabletopic.cluster.db import ClusterMetadata
from tabletopic.ids import NodeId


def test_each_move_of_a_controller_round_gets_the_reason_the_controller_had() -> None:
    before = {
        ("t", 0): events.PriorRow(leader=2, leader_node_epoch=1, target=None),  # broker 2 dead
        ("t", 1): events.PriorRow(leader=3, leader_node_epoch=1, target=None),  # broker 3 restarted
        ("t", 2): events.PriorRow(leader=1, leader_node_epoch=4, target=None),  # broker 1 draining
        ("t", 3): events.PriorRow(leader=4, leader_node_epoch=1, target=5),  # asked for
        ("t", 4): events.PriorRow(leader=4, leader_node_epoch=1, target=None),  # count balancing
    }
    moves = {("t", 0): 4, ("t", 1): 4, ("t", 2): 5, ("t", 3): 5, ("t", 4): 5, ("new", 0): 5}
    live = {1: 4, 3: 2, 4: 1, 5: 1}
    got = {(e.topic, e.partition): e for e in events.classify(moves, before, live, draining=[1])}
    assert [got[("t", p)].kind for p in range(5)] == [
        "failover", "failover", "drain", "reassignment", "count-balance",
    ]  # fmt: skip
    assert "broker 2 is dead" in got[("t", 0)].reason and got[("t", 0)].to_node == 4
    assert "restarted" in got[("t", 1)].reason
    assert got[("new", 0)].kind == "placed" and got[("new", 0)].from_node is None


@pytest.mark.postgres
def test_the_timeline_keeps_the_newest_events_and_leaves_first_placements_out_unless_asked(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = database.create_engine(postgres_url)
    try:
        ClusterMetadata(engine).migrate()
        monkeypatch.setattr(events, "KEEP", 3)
        events.record(engine, [events.ClusterEvent("placed", "new partition", "t", 0, None, 1)], 1)
        for i in range(4):
            events.record(engine, [events.ClusterEvent("failover", f"why {i}", "t", i, 1, 2)], 2)
        shown = events.recent(engine)
        assert [e.reason for e in shown] == ["why 3", "why 2", "why 1"]  # newest first, 3 kept
        assert shown[0].at is not None
        assert all(e.kind != "placed" for e in events.recent(engine, include_placed=True))  # pruned
    finally:
        engine.dispose()


def test_a_failover_of_many_partitions_reads_back_as_one_entry_with_user_topics_named_first() -> None:
    at = "2026-12-02T06:15:17+00:00"
    dead = "broker 2 is dead (its lease expired); broker {} took over"
    rows = [
        events.ClusterEvent(
            "failover", dead.format(1 + i % 2 * 2), "__transaction_state", i, 2, 1 + i % 2 * 2, at
        )
        for i in range(17)
    ]
    rows += [events.ClusterEvent("failover", dead.format(3), "walk", p, 2, 3, at) for p in (9, 0, 3)]
    later = events.ClusterEvent("failover", dead.format(1), "walk", 6, 2, 1, "2026-12-02T06:20:00+00:00")
    balanced = [
        events.ClusterEvent("auto-balance", f"broker 1 is {n} MB/s over", "walk", n, 1, 3, at) for n in (1, 2)
    ]
    found = events.decisions([later, *rows, *balanced])
    assert [d.kind for d in found] == ["failover", "failover", "auto-balance", "auto-balance"]
    assert found[0].line() == f"failover walk-6: {dead.format(1)}"  # one move: its whole reason
    many = found[1]
    assert many.partitions[:3] == ("walk-0", "walk-3", "walk-9") and len(many.partitions) == 20
    assert many.line() == (
        "failover of 20 partitions (walk-0, walk-3, walk-9, __transaction_state-0, __transaction_state-1 "
        "and 15 more): broker 2 is dead (its lease expired); to broker 3 (11), broker 1 (9)"
    )
    assert [d.cause for d in found[2:]] == ["broker 1 is 1 MB/s over", "broker 1 is 2 MB/s over"]
    evened = "partition counts evened out; broker 3 took it"
    balanced_from = [
        events.ClusterEvent("count-balance", evened, "walk", p, p % 2 + 1, 3, at) for p in range(4)
    ]
    shown = [d.line() for d in events.decisions(balanced_from)]
    assert shown == [
        f"count-balance of 2 partitions (walk-{a}, walk-{b}): partition counts evened out; "
        f"from broker {source} to broker 3 (2)"
        for a, b, source in ((0, 2, 1), (1, 3, 2))
    ]


def test_a_broker_unregistered_reads_back_as_one_entry_about_the_broker_alone() -> None:
    reason = "broker 4 unregistered by `tabletopic cluster unregister` (its last incarnation was epoch 2)"
    event = events.ClusterEvent(events.UNREGISTERED, reason, from_node=4, at="2026-12-02T17:28:37+00:00")
    (found,) = events.decisions([event])
    assert found.line() == f"unregistered: {reason}"  # no partition to name
    shown = found.as_dict()
    assert (shown["where"], shown["went_to"], shown["from_node"]) == ("-", "", 4)


@pytest.mark.postgres
def test_a_broker_joining_and_stopping_cleanly_are_on_the_timeline(postgres_url: str) -> None:
    """Scaling out and in shows on every broker's timeline: a registration (each incarnation) and
    a clean stop, each one entry about the broker alone."""
    engine = database.create_engine(postgres_url)
    try:
        meta = ClusterMetadata(engine)
        meta.migrate()
        epoch = meta.register(NodeId(4), "a", {"PLAINTEXT": ("127.0.0.1", 9122)}, lease_s=30)
        meta.set_state(NodeId(4), epoch, "draining")  # not an entry: the moves it causes are
        meta.set_state(NodeId(4), epoch, "stopped", expire=True)
        meta.set_state(NodeId(4), epoch, "stopped", expire=True)  # said once
        shown = [d.line() for d in events.decisions(events.recent(engine))]
        assert shown == [
            "stopped: broker 4 stopped cleanly (node epoch 1)",
            "joined: broker 4 registered in rack a (node epoch 1)",
        ]
    finally:
        engine.dispose()
