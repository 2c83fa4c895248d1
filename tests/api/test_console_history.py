"""What a starting broker takes of another broker's console series: the whole cluster's, from
before now, and nothing from an answer of another shape."""

from __future__ import annotations

from typing import Any

import pytest

from tabletopic.api.console_history import parse_cluster_series


def test_only_the_cluster_series_from_before_now_are_taken() -> None:
    body = {
        "t": [10.0, 20.0, 30.0],
        "cluster|bytes_in_per_s|broker_1": [1.0, None, 3.0],
        "topic|orders|cluster_records_in_per_s": [4, 5, 6],
        "topic|orders|records_per_s": [7.0, 8.0, 9.0],  # the peer's own count: not the cluster's
        "node|connections": [1.0, 1.0, 1.0],
    }
    assert parse_cluster_series(body, now=25.0) == (
        [10.0, 20.0],
        {"cluster|bytes_in_per_s|broker_1": [1.0, None], "topic|orders|cluster_records_in_per_s": [4, 5]},
    )


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"cluster|a": [1.0]},
        {"t": "now"},
        {"t": [2.0, 1.0]},
        {"t": [1.0, True]},
        {"t": [1.0, float("nan")]},
        {"t": [1.0, 2.0], "cluster|a": [1.0]},
        {"t": [1.0], "cluster|a": ["1"]},
        {"t": [1.0], "cluster|a": {"0": 1.0}},
    ],
)
def test_an_answer_of_another_shape_is_not_taken(body: Any) -> None:
    assert parse_cluster_series(body, now=100.0) is None
