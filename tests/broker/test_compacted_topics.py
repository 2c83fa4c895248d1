"""Compacted topics refuse records without a key, as Kafka does (INVALID_RECORD), with a real
producer; keyed records and tombstones (a key with a null value) are accepted."""

from __future__ import annotations

import uuid

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def _produce(bootstrap: str, topic: str, key: bytes | None, value: bytes | None) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0, "message.timeout.ms": 10_000})
    producer.produce(topic, value, key, partition=0, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(30)
    return outcome[0]


def test_compacted_topic_refuses_keyless_records(bootstrap: str) -> None:
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact,delete"})
    admin.create_topics([new])[topic].result(30)
    refused = _produce(bootstrap, topic, None, b"no key")
    assert refused is not None and refused.code() == KafkaError.INVALID_RECORD
    assert _produce(bootstrap, topic, b"k", b"v") is None
    assert _produce(bootstrap, topic, b"k", None) is None  # a tombstone
