"""The controller's balancing rounds around the pure planner: load rates from byte counters, which
reports count, when rounds run, cooldown, and the switch between load and count balancing."""

from __future__ import annotations

import pytest

from tabletopic.cluster.autobalance import AutoBalancer, AutoBalancerSettings, parse_load_key, plan_for
from tabletopic.cluster.balancer import BalancerSettings
from tabletopic.cluster.controller import Assignment
from tabletopic.cluster.db import ClusterSnapshot, NodeInfo
from tabletopic.cluster.load import LoadMeter, LoadReport

MB = 1_000_000


def snapshot(loads: dict[int, dict[str, list[int]]], leaders: dict[tuple[str, int], int]) -> ClusterSnapshot:
    nodes = {
        n: NodeInfo(n, 1, None, {"PLAINTEXT": ("127.0.0.1", 9000 + n)}, "alive", True, load)
        for n, load in loads.items()
    }
    partitions = {key: Assignment(leader, 1, 1) for key, leader in leaders.items()}
    return ClusterSnapshot(nodes, 1, 1, partitions)


def skewed() -> ClusterSnapshot:
    parts = {("hot", p): 1 for p in range(6)}
    load = {f"hot/{p}": [MB // 2, 0] for p in range(6)}
    return snapshot({1: load, 2: {}, 3: {}}, parts)


def test_load_meter_reports_rates_over_the_window() -> None:
    meter: LoadMeter[str] = LoadMeter(window_s=2.0)
    # Bytes in, bytes out, records in, records consumed; the counts are copied, not kept.
    counts = [0, 0, 0, 0]
    assert meter.rates({"a": counts}, now=0.0) == {"a": (0.0, 0.0, 0.0, 0.0)}
    counts[:] = [1000, 10, 4, 2]
    meter.rates({"a": counts}, now=1.0)
    counts[:] = [2000, 20, 9, 6]
    assert meter.rates({"a": counts}, now=2.0) == {"a": (1000.0, 10.0, 4.5, 3.0)}
    # Old samples leave the window: the rate follows the recent traffic only.
    meter.rates({"a": counts}, now=3.0)
    meter.rates({"a": counts}, now=4.0)
    assert meter.rates({"a": counts}, now=5.0)["a"] == (0.0, 0.0, 0.0, 0.0)


def test_load_meter_does_not_count_old_bytes_of_a_partition_led_again() -> None:
    meter: LoadMeter[str] = LoadMeter(window_s=10.0)
    meter.rates({"a": (5000, 0, 5, 0)}, now=0.0)
    assert meter.rates({"a": (5000, 0, 5, 0), "b": (100, 0, 1, 0)}, now=1.0)["a"] == (0.0, 0.0, 0.0, 0.0)


def test_load_meter_forgets_what_stayed_still_for_a_whole_window() -> None:
    """A broker counts every partition it serves and every one its groups commit; a deleted topic,
    or a partition led elsewhere since, must not stay in its counts (and its report) for ever."""
    meter: LoadMeter[str] = LoadMeter(window_s=2.0)
    totals: dict[str, list[int]] = {"gone": [500, 0, 5, 0], "busy": [0, 0, 0, 0]}
    for second in range(2):
        totals["busy"][0] += 100
        meter.rates(totals, now=float(second))
        assert meter.forget_idle(totals) == []  # the window is not yet whole
    totals["busy"][0] += 100
    meter.rates(totals, now=2.0)
    assert meter.forget_idle(totals) == ["gone"]
    assert list(totals) == ["busy"]
    # Counted again later, it counts as a partition seen for the first time: no negative rate,
    # no count from before it was forgotten.
    totals["gone"] = [50, 0, 1, 0]
    totals["busy"][0] += 100
    assert meter.rates(totals, now=3.0)["gone"] == (25.0, 0.0, 0.5, 0.0)


def test_a_load_report_is_read_from_its_json_only_when_asked() -> None:
    """Every broker reads every node's row on each metadata poll; the rates in it are parsed only
    by what reads them (the balancer, the console), so a poll never parses them."""
    report = LoadReport('{"orders/0": [5, 7], "orders/1": [1, 0]}')
    assert dict(report) == {"orders/0": [5, 7], "orders/1": [1, 0]}
    assert len(report) == 2 and report["orders/0"] == [5, 7]
    unread = LoadReport("{not json")  # built without parsing: a poll holding it does not fail
    with pytest.raises(ValueError):
        len(unread)
    assert dict(LoadReport("")) == {}


def test_load_keys_parse_and_garbage_is_ignored() -> None:
    assert parse_load_key("orders/3") == ("orders", 3)
    assert parse_load_key("garbage") is None
    assert parse_load_key("t/x") is None
    snap = snapshot({1: {"junk": [1], "nope/1": [MB, MB], "hot/0": ["1", 2]}}, {("hot", 0): 1})
    plan = plan_for(snap, BalancerSettings(min_bytes_per_second=0))
    assert plan.before == {1: (1.0, 2.0)}


def test_reports_of_a_broker_that_no_longer_leads_are_ignored() -> None:
    snap = snapshot({1: {"hot/0": [MB, 0]}, 2: {"hot/0": [5, 0]}}, {("hot", 0): 2})
    assert plan_for(snap, BalancerSettings(min_bytes_per_second=0)).before == {1: (0.0, 0.0), 2: (5.0, 0.0)}


def test_skewed_load_is_planned_away_with_reasons() -> None:
    plan = plan_for(skewed(), BalancerSettings(min_bytes_per_second=1000))
    assert {m.target for m in plan.moves} == {2, 3}
    assert all(m.source == 1 and "outside ±20%" in m.reason for m in plan.moves)
    assert all(abs(bytes_in - MB) <= 0.2 * MB for bytes_in, _ in plan.after.values())


def test_rounds_are_spaced_and_moved_partitions_cool_down() -> None:
    balancer = AutoBalancer(
        AutoBalancerSettings(
            detect_interval_s=1.0,
            metrics_window_s=4.0,
            planner=BalancerSettings(min_bytes_per_second=1000, cooldown_seconds=30.0),
        )
    )
    snap = skewed()
    assert balancer.busy(snap)
    first = balancer.round(snap, now=100.0)
    assert first is not None and first.moves
    assert balancer.round(snap, now=105.0) is None  # waits 1.5 windows after moving something
    # The same (stale) report again: the partitions just moved are cooling down, so the planner
    # moves others at most, never the same ones back and forth.
    second = balancer.round(snap, now=106.5)
    assert second is not None
    moved = {(m.topic, m.partition) for m in first.moves}
    assert not moved & {(m.topic, m.partition) for m in second.moves}


def test_idle_or_disabled_balancer_leaves_count_balancing_in_charge() -> None:
    idle = snapshot({1: {"hot/0": [10, 0]}, 2: {}}, {("hot", 0): 1})
    balancer = AutoBalancer(AutoBalancerSettings(planner=BalancerSettings(min_bytes_per_second=1000)))
    assert not balancer.busy(idle)
    assert balancer.round(idle, now=1.0) is not None and not balancer.last_plan.moves  # type: ignore[union-attr]
    off = AutoBalancer(AutoBalancerSettings(enabled=False))
    assert not off.busy(skewed()) and off.round(skewed(), now=1.0) is None
