"""ListOffsets by timestamp and MAX_TIMESTAMP name the exact record, as Kafka does, even inside one
batch whose records are not in time order (confluent-kafka's consumer and admin client)."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.support.kafka_clients import create_topic

BASE = 1_700_000_000_000
# One batch; the largest timestamp is the third record's.
STAMPS = [BASE, BASE + 10, BASE + 30, BASE + 20, BASE + 5]


def _one_batch(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200, "acks": "all"})
    for i, stamp in enumerate(STAMPS):
        producer.produce(topic, f"v{i}".encode(), partition=0, timestamp=stamp)
    assert producer.flush(30) == 0


def test_offsets_for_times_resolves_to_the_record_inside_a_batch(bootstrap: str) -> None:
    topic = f"times-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    _one_batch(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "times"})
    try:
        found = {}
        for target in (BASE + 10, BASE + 15, BASE + 25, BASE + 31):
            (answer,) = consumer.offsets_for_times([TopicPartition(topic, 0, target)], 30)
            found[target] = answer.offset
    finally:
        consumer.close()
    assert found == {BASE + 10: 1, BASE + 15: 2, BASE + 25: 2, BASE + 31: -1}


def test_max_timestamp_names_the_record_with_the_largest_timestamp(bootstrap: str) -> None:
    topic = f"maxts-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    _one_batch(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partition = TopicPartition(topic, 0)
    result = admin.list_offsets({partition: OffsetSpec.max_timestamp()})[partition].result(30)
    assert (result.offset, result.timestamp) == (2, BASE + 30)
