"""The console's in-memory ring of time series: bounded, aligned, and JSON-ready."""

from __future__ import annotations

import math

import pytest

from tabletopic.api.timeseries import SeriesRing


def test_the_ring_keeps_only_the_last_points_oldest_first() -> None:
    ring = SeriesRing(points=3, max_series=10)
    for t in range(5):
        ring.record(float(t), {"a": t * 10.0})
    window = ring.window()
    assert window["t"] == [2.0, 3.0, 4.0]
    assert window["a"] == [20.0, 30.0, 40.0]
    assert len(ring) == 3


def test_series_share_one_time_axis_with_gaps_as_none() -> None:
    ring = SeriesRing(points=4)
    ring.record(1.0, {"a": 1.0})
    ring.record(2.0, {"a": 2.0, "b": 5.0})
    ring.record(3.0, {"b": 6.0})
    window = ring.window()
    assert window["a"] == [1.0, 2.0, None]
    assert window["b"] == [None, 5.0, 6.0]
    assert ring.latest("a") is None and ring.latest("b") == 6.0


def test_a_series_without_values_for_a_whole_window_is_dropped() -> None:
    ring = SeriesRing(points=2)
    ring.record(1.0, {"gone": 1.0, "kept": 1.0})
    ring.record(2.0, {"kept": 1.0})
    assert "gone" in ring.names()
    ring.record(3.0, {"kept": 1.0})
    assert ring.names() == ["kept"]


def test_new_series_past_the_bound_are_refused_and_counted() -> None:
    ring = SeriesRing(points=2, max_series=2)
    ring.record(1.0, {"a": 1.0, "b": 1.0, "c": 1.0})
    assert ring.names() == ["a", "b"] and ring.refused == 1
    assert ring.bytes_bound == 2 * 3 * 8


def test_window_filters_by_prefix_and_time() -> None:
    ring = SeriesRing(points=10)
    for t in range(4):
        ring.record(float(t), {"table|x|lag_records": float(t), "topic|x|records_per_s": 1.0})
    window = ring.window("table|", since=2.0)
    assert window == {"t": [2.0, 3.0], "table|x|lag_records": [2.0, 3.0]}


def test_nan_values_never_reach_json() -> None:
    ring = SeriesRing(points=2)
    ring.record(1.0, {"a": math.nan})
    assert ring.window()["a"] == [None]


def test_a_ring_needs_room() -> None:
    with pytest.raises(ValueError):
        SeriesRing(points=1)


def test_an_empty_ring_starts_with_samples_taken_elsewhere_and_its_own_follow() -> None:
    """A restarted broker begins its cluster charts with another broker's: the newest samples that
    fit, gaps kept, and its own samples after them on the same axis."""
    ring = SeriesRing(points=3)
    loaded = ring.preload([1.0, 2.0, 3.0, 4.0], {"cluster|a": [1.0, None, 3.0, 4.0], "cluster|b": [5.0] * 4})
    assert loaded == 3
    ring.record(9.0, {"cluster|a": 9.0, "node|own": 1.0})
    assert ring.window() == {
        "t": [3.0, 4.0, 9.0],
        "cluster|a": [3.0, 4.0, 9.0],
        "cluster|b": [5.0, 5.0, None],
        "node|own": [None, None, 1.0],
    }
    # A ring with samples of its own keeps them.
    assert ring.preload([1.0], {"cluster|a": [0.0]}) == 0
    with pytest.raises(ValueError):
        SeriesRing().preload([1.0, 2.0], {"cluster|a": [1.0]})
