"""Transactions with real clients against ``tabletopic serve``: confluent-kafka's transactional
producer committing and aborting, read_committed and read_uncommitted consumers, a zombie producer
fenced by a newer one, consume-transform-produce with send_offsets_to_transaction, a group member
of an older generation refused its offsets (KIP-447), and kafka-python's and aiokafka's
transactional producers."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.support.kafka_clients import (
    create_topic,
    read_isolated,
    started_transactional_producer,
)
from tests.support.waiting import wait_until_sync


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_committed_transaction_is_read_and_aborted_one_is_not(bootstrap: str) -> None:
    topic = _name("txn")
    create_topic(bootstrap, topic, 2)
    producer = started_transactional_producer(bootstrap, _name("tid"))
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    committed = read_isolated(bootstrap, topic, 2, "read_committed", 6)
    assert sorted(committed) == sorted(f"committed-{i}".encode() for i in range(6))
    everything = read_isolated(bootstrap, topic, 2, "read_uncommitted", 11)
    assert len(everything) == 11


def test_open_transaction_is_invisible_to_read_committed_until_commit(bootstrap: str) -> None:
    topic = _name("open")
    create_topic(bootstrap, topic, 1)
    producer = started_transactional_producer(bootstrap, _name("tid"))
    producer.begin_transaction()
    producer.produce(topic, b"pending", partition=0)
    producer.flush(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, b"after", partition=0)
    plain.flush(30)
    assert read_isolated(bootstrap, topic, 1, "read_committed", 0) == []  # both wait behind the open txn
    producer.commit_transaction(30)
    assert read_isolated(bootstrap, topic, 1, "read_committed", 2) == [b"pending", b"after"]


def test_zombie_producer_is_fenced_by_a_newer_one(bootstrap: str) -> None:
    topic = _name("zombie")
    create_topic(bootstrap, topic, 1)
    transactional_id = _name("tid")
    zombie = started_transactional_producer(bootstrap, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(30)
    successor = started_transactional_producer(bootstrap, transactional_id)  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(30)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    assert read_isolated(bootstrap, topic, 1, "read_committed", 1) == [b"successor"]


def test_consume_transform_produce_commits_offsets_with_the_transaction(bootstrap: str) -> None:
    source, sink, group = _name("in"), _name("out"), _name("ctp")
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        plain.produce(source, f"m{i}".encode(), partition=0)
    plain.flush(30)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    producer = started_transactional_producer(bootstrap, _name("tid"))
    seen = 0
    try:
        while seen < 10:
            message = consumer.poll(1)
            if message is None or message.error() is not None:
                continue
            producer.begin_transaction()
            producer.produce(sink, message.value().upper(), partition=0)
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, message.offset() + 1)], consumer.consumer_group_metadata(), 30
            )
            producer.commit_transaction(30)
            seen += 1
        (committed,) = consumer.committed([TopicPartition(source, 0)], 30)
    finally:
        consumer.close()
    assert committed.offset == 10
    assert read_isolated(bootstrap, sink, 1, "read_committed", 10) == [f"M{i}".encode() for i in range(10)]


def test_a_member_of_an_older_generation_cannot_commit_offsets_with_its_transaction(bootstrap: str) -> None:
    """KIP-447's fence: a copier stalled past a rebalance still holds its old group metadata. Its
    TxnOffsetCommit is refused ILLEGAL_GENERATION, which the producer must abort on, so the
    partitions' new owner does not copy the same records under a second committed transaction."""
    source, group = _name("zin"), _name("zombies")
    create_topic(bootstrap, source, 2)
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    }
    first, second = Consumer(settings), Consumer(settings)
    producer = started_transactional_producer(bootstrap, _name("tid"))
    try:
        first.subscribe([source])
        wait_until_sync(lambda: first.poll(0.2) is None and first.assignment(), timeout=30)
        stale = first.consumer_group_metadata()  # generation 1
        second.subscribe([source])

        def both_assigned() -> bool:  # the rebalance to generation 2, each member polling
            first.poll(0.1)
            second.poll(0.1)
            return len(first.assignment()) == 1 and len(second.assignment()) == 1

        wait_until_sync(both_assigned, timeout=30)
        offsets = [TopicPartition(source, p, 5) for p in range(2)]
        producer.begin_transaction()
        with pytest.raises(KafkaException) as refused:
            producer.send_offsets_to_transaction(offsets, stale, 30)
        error = refused.value.args[0]
        assert error.code() == KafkaError.ILLEGAL_GENERATION and error.txn_requires_abort(), error
        producer.abort_transaction(30)

        producer.begin_transaction()  # the same offsets under the current generation are taken
        producer.send_offsets_to_transaction(offsets, first.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        assert [tp.offset for tp in first.committed(offsets, 30)] == [5, 5]
    finally:
        first.close()
        second.close()


def test_kafka_python_transactional_producer(bootstrap: str) -> None:
    from kafka import KafkaProducer

    topic = _name("kp")
    create_topic(bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=_name("tid"))
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"dropped", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(topic, b"kept", partition=0)
    producer.commit_transaction()
    producer.close()
    assert read_isolated(bootstrap, topic, 1, "read_committed", 1) == [b"kept"]


def test_aiokafka_transactional_producer(bootstrap: str) -> None:
    from aiokafka import AIOKafkaProducer

    topic = _name("aio")
    create_topic(bootstrap, topic, 1)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=_name("tid"))
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"kept", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"dropped", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_isolated(bootstrap, topic, 1, "read_committed", 1) == [b"kept"]
