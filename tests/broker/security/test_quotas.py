"""Client quotas: Kafka's entity precedence and throttle arithmetic, Describe/AlterClientQuotas on the
wire, and real producers and consumers throttled with throttle_time_ms."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.security.quotas import (
    CLIENT_ID,
    USER,
    InvalidQuota,
    QuotaTracker,
    Rate,
    make_entity,
    throttle_ms,
)
from tests.support.kafka_requests import request
from tests.support.raw_kafka_client import connect, roundtrip
from tests.support.secure_brokers import SecureBroker


def test_most_specific_entity_wins() -> None:
    tracker = QuotaTracker(11, 1.0, clock=lambda: 0.0)
    tracker.replace(
        {
            make_entity([(USER, None)]): {"producer_byte_rate": 1.0},
            make_entity([(USER, "alice")]): {"producer_byte_rate": 2.0},
            make_entity([(USER, "alice"), (CLIENT_ID, "app")]): {"producer_byte_rate": 3.0},
            make_entity([(CLIENT_ID, "app")]): {"producer_byte_rate": 4.0},
        }
    )
    assert tracker.quota_for("alice", "app", "producer_byte_rate") == (
        make_entity([(USER, "alice"), (CLIENT_ID, "app")]),
        3.0,
    )
    assert tracker.quota_for("alice", "other", "producer_byte_rate")[1] == 2.0  # type: ignore[index]
    assert tracker.quota_for("bob", "app", "producer_byte_rate")[1] == 1.0  # type: ignore[index]
    assert tracker.quota_for("bob", "app", "consumer_byte_rate") is None


def test_throttle_is_the_time_to_fall_back_to_the_quota() -> None:
    assert throttle_ms(100.0, 100.0, 11.0) == 0
    assert throttle_ms(150.0, 100.0, 10.0) == 5000
    assert throttle_ms(10_000.0, 100.0, 10.0) == 10_000  # never longer than the window


def test_rate_counts_a_young_window_as_full() -> None:
    rate = Rate(10, 1.0)
    rate.record(1000, now=0.5)
    assert rate.rate(0.5) == 100.0
    rate.record(1000, now=20.0)  # the old sample has left the window
    assert rate.rate(20.0) == 100.0


@pytest.mark.parametrize(
    "parts",
    [[], [("planet", "x")], [(USER, "a"), (USER, "b")], [(USER, "")], [("ip", "1.2.3.4"), (USER, "a")]],
)
def test_bad_entities_are_refused(parts: list[tuple[str, str | None]]) -> None:
    with pytest.raises(InvalidQuota):
        make_entity(parts)


# --- on the wire and with real clients -----------------------------------------------------------


def alter(bootstrap: str, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]]) -> Any:
    sock = connect(bootstrap)
    try:
        return roundtrip(
            sock,
            request(
                49, 1,
                entries=[{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                          "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}],
                validate_only=False,
            ),
        )  # fmt: skip
    finally:
        sock.close()


def describe(bootstrap: str, client_id: str) -> Any:
    sock = connect(bootstrap)
    try:
        return roundtrip(
            sock,
            request(
                48,
                1,
                components=[{"entity_type": CLIENT_ID, "match_type": 0, "match": client_id}],
                strict=False,
            ),
        )
    finally:
        sock.close()


@pytest.mark.integration
def test_alter_and_describe_client_quotas(secure_broker: SecureBroker) -> None:
    client_id = f"quota-{uuid.uuid4().hex[:6]}"
    answer = alter(secure_broker.plaintext, [(CLIENT_ID, client_id)], [("consumer_byte_rate", 1024.0, False)])
    assert answer.entries[0].error_code is ErrorCode.none
    described = describe(secure_broker.plaintext, client_id)
    assert [(v.key, v.value) for v in described.entries[0].values] == [("consumer_byte_rate", 1024.0)]
    bad = alter(secure_broker.plaintext, [(CLIENT_ID, client_id)], [("retention.ms", 1.0, False)])
    assert bad.entries[0].error_code is ErrorCode.invalid_request
    alter(secure_broker.plaintext, [(CLIENT_ID, client_id)], [("consumer_byte_rate", 0.0, True)])
    assert describe(secure_broker.plaintext, client_id).entries == ()


def _produce(bootstrap: str, client_id: str, topic: str, count: int) -> list[int]:
    from confluent_kafka import Producer

    throttles: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    payload = b"x" * 10_000
    for _ in range(count):
        producer.produce(topic, payload)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0.5)
    return throttles


@pytest.mark.integration
def test_producer_over_its_byte_rate_is_throttled(secure_broker: SecureBroker) -> None:
    slow = f"slow-{uuid.uuid4().hex[:6]}"
    topic = f"quota-{uuid.uuid4().hex[:6]}"
    answer = alter(secure_broker.plaintext, [(CLIENT_ID, slow)], [("producer_byte_rate", 20_000.0, False)])
    assert answer.entries[0].error_code is ErrorCode.none
    throttled = _produce(secure_broker.plaintext, slow, topic, 60)  # 600 kB against 20 kB/s
    assert throttled and max(throttled) > 0
    assert _produce(secure_broker.plaintext, f"free-{uuid.uuid4().hex[:6]}", topic, 60) == []


@pytest.mark.integration
def test_consumer_over_its_byte_rate_is_throttled(secure_broker: SecureBroker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = f"quota-fetch-{uuid.uuid4().hex[:6]}"
    _produce(secure_broker.plaintext, "loader", topic, 40)
    reader = f"reader-{uuid.uuid4().hex[:6]}"
    alter(secure_broker.plaintext, [(CLIENT_ID, reader)], [("consumer_byte_rate", 20_000.0, False)])
    throttles: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": secure_broker.plaintext,
            "client.id": reader,
            "group.id": reader,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received += 1
        if received == 40 and throttles:
            break
    consumer.close()
    assert received == 40  # throttled, not starved
    assert throttles and max(throttles) > 0
