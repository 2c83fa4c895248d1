"""ListOffsets by timestamp and MAX_TIMESTAMP name the exact record, as Kafka does, even inside one
batch whose records are not in time order (confluent-kafka's consumer and admin client); under
read_committed they never name a record at or above the last stable offset."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
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


def test_read_committed_timestamp_lookups_stop_at_the_last_stable_offset(bootstrap: str) -> None:
    """Records of an open transaction carry the largest timestamps: a read_committed lookup by
    timestamp or MAX_TIMESTAMP that lands on one of them answers offset -1, timestamp -1 (as Kafka
    does when the found offset is at or above the last stable offset) until the commit; a
    read_uncommitted lookup names them all along."""
    topic = f"lsots-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    _one_batch(bootstrap, topic)  # offsets 0-4, committed, up to BASE + 30
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tid-{topic}", "transaction.timeout.ms": 60_000}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    # Half an hour ahead, so the commit marker (stamped with the broker's clock) stays below them.
    ahead = int(time.time() * 1000) + 1_800_000
    for i, stamp in enumerate((ahead, ahead + 100)):  # offsets 5, 6
        producer.produce(topic, f"open-{i}".encode(), partition=0, timestamp=stamp)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partition = TopicPartition(topic, 0)

    def looked_up(isolation: str) -> tuple[int, tuple[int, int], int]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "isolation.level": isolation})
        try:
            (by_time,) = consumer.offsets_for_times([TopicPartition(topic, 0, BASE + 50)], 30)
            (before,) = consumer.offsets_for_times([TopicPartition(topic, 0, BASE + 15)], 30)
        finally:
            consumer.close()
        level = IsolationLevel[isolation.upper()]
        spec = {partition: OffsetSpec.max_timestamp()}
        newest = admin.list_offsets(spec, isolation_level=level)[partition].result(30)
        return by_time.offset, (newest.offset, newest.timestamp), before.offset

    assert looked_up("read_committed") == (-1, (-1, -1), 2)
    assert looked_up("read_uncommitted") == (5, (6, ahead + 100), 2)
    producer.commit_transaction(30)
    assert looked_up("read_committed") == (5, (6, ahead + 100), 2)
