"""Per-partition network load as the auto-balancer wants it: bytes per second over a sliding
window, from the cumulative counters the broker keeps (every Produce adds to bytes in and records
in, every Fetch to bytes out). Each broker reports these rates for the partitions it leads with its
lease renewal; the controller's balancer reads the bytes from the nodes' rows, and the console of
every broker plots bytes and records across the cluster from them."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Hashable, Iterator, Mapping, MutableMapping, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# The figures of a partition's entry in a broker's report, in order, per second. Bytes for the
# balancer; records in and records consumed (how far the groups the broker coordinates committed,
# of any partition) for the console and `cluster status`. A broker of an earlier release reports
# the first two or three.
BYTES_IN, BYTES_OUT, RECORDS_IN, RECORDS_CONSUMED = range(4)


def figure(rates: Sequence[float], which: int) -> float:
    """One figure of a report's entry; 0 where its broker reports no such figure."""
    return float(rates[which]) if len(rates) > which else 0.0


# One partition's cumulative counts, as the broker keeps them: bytes in, bytes out, records in,
# records consumed (the report's figures, per second once metered).
Counts = tuple[int, int, int, int]
Rates = tuple[float, float, float, float]
_NONE: Counts = (0, 0, 0, 0)


class LoadMeter(Generic[K]):
    """Turns cumulative counts (``{key: [bytes in, bytes out, records in, records consumed]}``)
    into rates over ``window_s``.

    A key seen for the first time counts from the oldest sample in the window (0 before), so a
    partition a broker just took over starts at its real rate after one window, not at a spike.
    Runs on the event loop with every lease renewal, over every partition counted in the last
    window: one pass copies the counts and takes the rates, the four figures unpacked by name (at
    10,000 partitions a generic loop over the figures took twice as long).
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, dict[K, Counts]]] = deque()

    def rates(self, totals: Mapping[K, Sequence[int]], now: float) -> dict[K, Rates]:
        """Record ``totals`` at ``now`` (monotonic seconds; copied, so the caller's counts may go
        on changing) and return each key's rates."""
        samples = self._samples
        while len(samples) >= 2 and now - samples[1][0] >= self.window_s:
            samples.popleft()
        then, old = samples[0] if samples else (now, {})
        elapsed = now - then
        per_second = 1 / elapsed if elapsed > 0 else 0.0
        sample: dict[K, Counts] = {}
        result: dict[K, Rates] = {}
        for key, (bytes_in, bytes_out, records_in, consumed) in totals.items():
            sample[key] = (bytes_in, bytes_out, records_in, consumed)
            was_in, was_out, was_records, was_consumed = old.get(key, _NONE)
            result[key] = (
                max(bytes_in - was_in, 0) * per_second,
                max(bytes_out - was_out, 0) * per_second,
                max(records_in - was_records, 0) * per_second,
                max(consumed - was_consumed, 0) * per_second,
            )
        samples.append((now, sample))
        return result

    def forget_idle(self, totals: MutableMapping[K, V]) -> list[K]:
        """Drop from ``totals``, and from the samples, every key whose counts have not moved across
        a whole window, and return those keys.

        Without it a broker would keep counts, and report names, for every partition it ever
        counted: of topics deleted since, and of partitions led elsewhere for months. A key dropped
        and counted again is a key seen for the first time (see the class), so its rate is right.
        What is kept is bounded by the partitions that moved in the last window.
        """
        samples = self._samples
        if len(samples) < 2:
            return []
        (then, oldest), (now, newest) = samples[0], samples[-1]
        if now - then < self.window_s:
            return []
        idle = [key for key, counts in newest.items() if oldest.get(key) == counts]
        for key in idle:
            totals.pop(key, None)
            for _, sample in samples:
                sample.pop(key, None)
        return idle


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
