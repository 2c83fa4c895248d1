"""Where a librdkafka producer's acknowledgement time goes, from its own statistics.

librdkafka emits a JSON document every ``statistics.interval.ms``; per broker it holds three
windowed latencies (microseconds) that add up to a record's acknowledgement time:

- ``int_latency``: from ``produce()`` until the record is put in a ProduceRequest. It includes
  ``linger.ms`` and, when more requests are due than the connection may have in flight (at most
  five for an idempotent producer), the wait for a turn;
- ``outbuf_latency``: the request waiting in the connection's send queue;
- ``rtt``: the request's round trip to the broker and back, which is what the broker itself costs.

Records per ProduceRequest (records sent over requests sent) shows how much one request carries:
librdkafka puts one partition in a request (its issue #1700), so with many partitions and few
records each it is close to one, and the requests of a broker's partitions take turns.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

# The windowed latencies of one broker, as librdkafka names them, in the order a record meets them.
STAGES = ("int_latency", "outbuf_latency", "rtt")


@dataclass(frozen=True)
class Window:
    """One statistics document: when it came, and per stage the sum and count of the samples of
    every broker in its window; the records and ProduceRequests sent so far."""

    at: float
    sums: dict[str, float]
    counts: dict[str, int]
    records_sent: int
    requests_sent: int


class ProducerStats:
    """A ``stats_cb`` for a confluent-kafka producer that keeps each window, and the account of
    any span of them. librdkafka calls it from ``poll()``; the report reads from another thread."""

    def __init__(self) -> None:
        self._windows: list[Window] = []
        self._lock = threading.Lock()

    def settings(self, interval_ms: int = 5000) -> dict[str, object]:
        """The producer settings that turn the statistics on and route them here."""
        return {"statistics.interval.ms": interval_ms, "stats_cb": self.on_stats}

    def on_stats(self, text: str) -> None:
        stats = json.loads(text)
        brokers = [b for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
        sums = {stage: float(sum(b[stage]["sum"] for b in brokers)) for stage in STAGES}
        counts = {stage: int(sum(b[stage]["cnt"] for b in brokers)) for stage in STAGES}
        requests = sum(int(b.get("req", {}).get("Produce", 0)) for b in brokers)
        window = Window(time.monotonic(), sums, counts, int(stats.get("txmsgs", 0)), requests)
        with self._lock:
            self._windows.append(window)

    def account(self, since: float, until: float) -> str:
        """Mean milliseconds per stage, and records per ProduceRequest, over the windows that
        ended between ``since`` and ``until``."""
        with self._lock:
            windows = [w for w in self._windows if since <= w.at <= until]
            before = [w for w in self._windows if w.at < since]
        if not windows:
            return "librdkafka's account: no statistics in that span"
        means = []
        for stage in STAGES:
            count = sum(w.counts[stage] for w in windows)
            total = sum(w.sums[stage] for w in windows)
            means.append(total / count / 1000 if count else float("nan"))
        start = before[-1] if before else None
        records = windows[-1].records_sent - (start.records_sent if start else 0)
        requests = windows[-1].requests_sent - (start.requests_sent if start else 0)
        per_request = records / requests if requests else float("nan")
        queued, outbuf, rtt = means
        return (
            f"librdkafka's account of it (means): {queued:.1f} ms before the record is in a request "
            f"(linger and waiting for a turn), {outbuf:.1f} ms in the send queue, {rtt:.1f} ms the "
            f"broker's round trip; {per_request:.1f} records per ProduceRequest"
        )
