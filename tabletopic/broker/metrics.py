"""Prometheus metrics of the broker, registered on ``platform.metrics``."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterator

from kio.schema.index import api_key_map
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"api_{api_key}")


class _InFlight:
    """Requests received and not answered yet, by API: how many, and the oldest one's age. A request
    held for long (an offset commit queued behind slow database writes, a produce waiting on
    storage) shows here while it waits; the latency histogram sees it only once it is answered."""

    def __init__(self) -> None:
        # API key -> {ticket: monotonic start}; insertion order is arrival order.
        self.started: dict[int, dict[int, float]] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        count = GaugeMetricFamily(
            "tabletopic_broker_requests_in_flight",
            "Requests received and not answered yet, by API.",
            labels=["api"],
        )
        oldest = GaugeMetricFamily(
            "tabletopic_broker_oldest_request_in_flight_seconds",
            "Age of the oldest request of an API not answered yet (0 when none).",
            labels=["api"],
        )
        now = time.monotonic()
        for api_key, started in list(self.started.items()):
            try:  # the loop may change it while a scrape on another thread reads it
                first = next(iter(started.values()), None)
            except RuntimeError:
                first = None
            count.add_metric([api_name(api_key)], float(len(started)))
            oldest.add_metric([api_name(api_key)], 0.0 if first is None else now - first)
        yield count
        yield oldest


class BrokerMetrics:
    def __init__(self, registry: CollectorRegistry, partition_count: Callable[[], int]) -> None:
        self.requests = Counter(
            "tabletopic_broker_requests",
            "Kafka requests answered, by API and error code name.",
            ["api", "error"],
            registry=registry,
        )
        self.bytes_in = Counter(
            "tabletopic_broker_bytes_in",
            "Request bytes received (frames incl. length prefix).",
            registry=registry,
        )
        self.bytes_out = Counter("tabletopic_broker_bytes_out", "Response bytes sent.", registry=registry)
        self.records_bytes_in = Counter(
            "tabletopic_broker_produce_bytes", "Record batch bytes appended by Produce.", registry=registry
        )
        self.latency = Histogram(
            "tabletopic_broker_request_seconds",
            "Time from parsed request to response ready, by API.",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.connections = Gauge(
            "tabletopic_broker_connections", "Open Kafka connections.", registry=registry
        )
        partitions = Gauge("tabletopic_broker_partitions", "Partitions of all topics.", registry=registry)
        partitions.set_function(lambda: float(partition_count()))
        self._in_flight = _InFlight()
        # The labelled children, kept: ``labels()`` takes a lock and builds its key on every call,
        # and these are counted for every request.
        self._latency_of: dict[int, Histogram] = {}
        self._answered_of: dict[tuple[int, str], Counter] = {}
        registry.register(self._in_flight)
        self._tickets = itertools.count()

    def took(self, api_key: int, seconds: float) -> None:
        """A request of ``api_key`` was answered ``seconds`` after it was parsed."""
        latency = self._latency_of.get(api_key)
        if latency is None:
            latency = self._latency_of[api_key] = self.latency.labels(api_name(api_key))
        latency.observe(seconds)

    def answered(self, api_key: int, error: str) -> None:
        """Count a request of ``api_key`` answered with ``error`` (an error code's name)."""
        counter = self._answered_of.get((api_key, error))
        if counter is None:
            counter = self._answered_of[api_key, error] = self.requests.labels(api_name(api_key), error)
        counter.inc()

    def request_started(self, api_key: int) -> Callable[[], object]:
        """Count a request as in flight (with its age) until the returned function is called.

        A plain call pair, not a context manager: it runs for every request (under a microsecond)."""
        started = self._in_flight.started.get(api_key)
        if started is None:
            started = self._in_flight.started[api_key] = {}
        ticket = next(self._tickets)
        started[ticket] = time.monotonic()
        return functools.partial(started.pop, ticket, None)
