"""The broker's in-flight request gauges: a request held for long is seen while it waits (the
latency histogram sees it only once answered)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from tabletopic.broker.metrics import BrokerMetrics

OFFSET_COMMIT = 8


def _sample(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(name, {"api": "offset_commit"})


def test_requests_in_flight_and_the_oldest_ones_age_follow_the_requests() -> None:
    registry = CollectorRegistry()
    metrics = BrokerMetrics(registry, lambda: 0)
    first = metrics.request_started(OFFSET_COMMIT)
    time.sleep(0.05)  # the subject: the first request ages before the second starts
    second = metrics.request_started(OFFSET_COMMIT)
    assert _sample(registry, "tabletopic_broker_requests_in_flight") == 2
    oldest = _sample(registry, "tabletopic_broker_oldest_request_in_flight_seconds")
    assert oldest is not None and oldest >= 0.05  # the first one's age, not the second's
    first()  # answered out of order: the second is the oldest now
    assert _sample(registry, "tabletopic_broker_requests_in_flight") == 1
    oldest = _sample(registry, "tabletopic_broker_oldest_request_in_flight_seconds")
    assert oldest is not None and oldest < 0.05
    second()
    assert _sample(registry, "tabletopic_broker_requests_in_flight") == 0
    assert _sample(registry, "tabletopic_broker_oldest_request_in_flight_seconds") == 0


def test_ending_a_request_twice_is_harmless() -> None:
    registry = CollectorRegistry()
    metrics = BrokerMetrics(registry, lambda: 0)
    answered = metrics.request_started(OFFSET_COMMIT)
    answered()
    answered()
    assert _sample(registry, "tabletopic_broker_requests_in_flight") == 0
