"""The percentile every bench script prints its latencies with.

One definition, so that a p99 from one bench means what it means in another: nearest rank, the
value at rank ``int(q * n)`` of the sorted sample (its largest for ``q = 1``). An empty sample
gives NaN, which prints as ``nan`` where a made-up zero would read as a measurement.
"""

from __future__ import annotations

from collections.abc import Iterable


def nearest_rank(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0 <= q <= 1) of ``values`` by nearest rank; NaN when there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
