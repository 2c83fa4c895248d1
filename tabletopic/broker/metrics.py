"""Prometheus metrics of the broker, registered on ``platform.metrics``."""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.index import api_key_map
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"api_{api_key}")


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
