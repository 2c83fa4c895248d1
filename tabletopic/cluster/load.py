"""Per-partition network load as the auto-balancer wants it: bytes per second over a sliding
window, from the cumulative counters the broker keeps (every Produce adds to bytes in and records
in, every Fetch to bytes out). Each broker reports these rates for the partitions it leads with its
lease renewal; the controller's balancer reads the bytes from the nodes' rows, and the console of
every broker plots bytes and records across the cluster from them."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# The figures of a partition's entry in a broker's report, in order, per second. Bytes for the
# balancer; records in and records consumed (how far the groups the broker coordinates committed,
# of any partition) for the console and `cluster status`. A broker of an earlier release reports
# the first two or three.
BYTES_IN, BYTES_OUT, RECORDS_IN, RECORDS_CONSUMED = range(4)


def figure(rates: Sequence[float], which: int) -> float:
    """One figure of a report's entry; 0 where its broker reports no such figure."""
    return float(rates[which]) if len(rates) > which else 0.0


class LoadMeter(Generic[K]):
    """Turns cumulative ``{key: (figure, ...)}`` samples (the report's figures: bytes in, bytes out,
    records in, records consumed) into rates over ``window_s``.

    A key seen for the first time counts from the oldest sample in the window (0 before), so a
    partition a broker just took over starts at its real rate after one window, not at a spike.
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, dict[K, tuple[int, ...]]]] = deque()

    def rates(self, totals: Mapping[K, tuple[int, ...]], now: float) -> dict[K, tuple[float, ...]]:
        """Record ``totals`` at ``now`` (monotonic seconds) and return each key's rates, figure by
        figure (every key's tuple has the same length)."""
        self._samples.append((now, dict(totals)))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window_s:
            self._samples.popleft()
        then, old = self._samples[0]
        elapsed = now - then
        if elapsed <= 0:
            return {key: tuple(0.0 for _ in figures) for key, figures in totals.items()}
        result = {}
        for key, figures in totals.items():
            before = old.get(key) or (0,) * len(figures)
            result[key] = tuple(max(f - b, 0) / elapsed for f, b in zip(figures, before, strict=True))
        return result


class LoadReport(Mapping[str, list[float]]):
    """One broker's reported rates, ``{"topic/partition": [bytes in/s, bytes out/s, records in/s,
    records consumed/s]}`` (see :data:`BYTES_IN` ...), kept as the JSON text of its node row and
    parsed on first use.

    Every broker reads every node's row on each poll of the cluster metadata, but only the
    controller's balancer, the console and ``cluster status`` read the rates. At 1,200 partitions,
    parsing them all on every poll cost each broker about 2 % of a core.
    """

    __slots__ = ("_parsed", "_text")

    def __init__(self, text: str | None) -> None:
        self._text = text  # None or empty: no report yet
        self._parsed: dict[str, list[float]] | None = None

    def _rates(self) -> dict[str, list[float]]:
        if self._parsed is None:
            self._parsed = json.loads(self._text or "{}")
        return self._parsed

    def __getitem__(self, key: str) -> list[float]:
        return self._rates()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rates())

    def __len__(self) -> int:
        return len(self._rates())
