"""A bounded in-memory ring of time series, so the console plots the last hour without Prometheus.

All series share one time axis (one sample of the node every interval), which is what the browser's
chart library wants: aligned columns. Each series is a fixed ``array('d')`` of ``points`` doubles
(NaN where it had no value), so memory is at most ``points x (max_series + 1) x 8`` bytes: with the
defaults (720 points = one hour at 5 s, 1,000 series) about 5.8 MB. Series that had no value for a
whole window (a deleted topic, a group gone) are dropped; past ``max_series`` new series are refused
(and counted) rather than evicting ones a page is showing.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

NAN = float("nan")


@dataclass
class SeriesRing:
    """``points`` samples per series on a shared time axis; ``record`` appends one sample of all."""

    points: int = 720
    max_series: int = 1000
    _times: array[float] = field(init=False)
    _series: dict[str, array[float]] = field(init=False, default_factory=dict)
    _head: int = field(init=False, default=0)  # the slot the next sample goes to
    _count: int = field(init=False, default=0)  # samples held (<= points)
    refused: int = field(init=False, default=0)  # new series refused past max_series

    def __post_init__(self) -> None:
        if self.points < 2 or self.max_series < 1:
            raise ValueError("a series ring needs at least 2 points and 1 series")
        self._times = array("d", [NAN] * self.points)

    @property
    def bytes_bound(self) -> int:
        """The most memory the values can take (8 bytes per point, time axis included)."""
        return self.points * (self.max_series + 1) * 8

    def __len__(self) -> int:
        return self._count

    def names(self) -> list[str]:
        return sorted(self._series)

    def record(self, at: float, values: Mapping[str, float]) -> None:
        """One sample: ``values`` by series name at time ``at`` (epoch seconds)."""
        slot = self._head
        self._times[slot] = at
        for name, ring in list(self._series.items()):
            value = values.get(name)
            ring[slot] = NAN if value is None else float(value)
            if value is None and all(math.isnan(v) for v in ring):
                del self._series[name]  # nothing left to show
        for name, value in values.items():
            if name in self._series:
                continue
            if len(self._series) >= self.max_series:
                self.refused += 1
                continue
            ring = array("d", [NAN] * self.points)
            ring[slot] = float(value)
            self._series[name] = ring
        self._head = (slot + 1) % self.points
        self._count = min(self._count + 1, self.points)

    def preload(self, times: Sequence[float], columns: Mapping[str, Sequence[float | None]]) -> int:
        """Start an empty ring with samples taken elsewhere (``times`` oldest first, each column as
        long as ``times``); the newest ``points`` are kept. Returns the samples loaded: 0 where the
        ring already holds samples of its own. A column that does not fit raises ValueError."""
        if self._count:
            return 0
        if any(len(column) != len(times) for column in columns.values()):
            raise ValueError("every column must have one value per sample time")
        kept = len(times) - min(len(times), self.points)
        for slot, at in enumerate(times[kept:]):
            self._times[slot] = float(at)
        for name, column in columns.items():
            if len(self._series) >= self.max_series:
                self.refused += 1
                continue
            ring = array("d", [NAN] * self.points)
            for slot, value in enumerate(column[kept:]):
                ring[slot] = NAN if value is None else float(value)
            self._series[name] = ring
        self._count = len(times) - kept
        self._head = self._count % self.points
        return self._count

    def _order(self) -> list[int]:
        start = (self._head - self._count) % self.points
        return [(start + i) % self.points for i in range(self._count)]

    def window(
        self, prefix: str = "", since: float | None = None, keep: Callable[[str], bool] | None = None
    ) -> dict[str, list[float | None]]:
        """Oldest first: ``{"t": [...], name: [...]}`` for every series whose name starts with
        ``prefix`` (and that ``keep`` keeps, if given; JSON-ready: NaN becomes None), optionally
        only samples at or after ``since``."""
        order = [i for i in self._order() if since is None or self._times[i] >= since]
        out: dict[str, list[float | None]] = {"t": [self._times[i] for i in order]}
        for name in sorted(self._series):
            if name.startswith(prefix) and (keep is None or keep(name)):
                ring = self._series[name]
                out[name] = [None if math.isnan(ring[i]) else ring[i] for i in order]
        return out

    def latest(self, name: str) -> float | None:
        ring = self._series.get(name)
        if ring is None or not self._count:
            return None
        value = ring[(self._head - 1) % self.points]
        return None if math.isnan(value) else value
