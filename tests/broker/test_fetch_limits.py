"""``fetch.max.bytes`` and ``max.partition.fetch.bytes`` as Kafka honours them, seen by a real
consumer: no response exceeds the limits except by its very first batch, and the consumer still
reads everything (also a batch larger than both limits)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.support.inproc_broker import inproc_broker
from tests.support.kafka_requests import make_batch

BATCH_VALUE = 10_000  # one record per batch: ~10 KB batches
FRAMING = 512  # response header, topic and partition entries


def _consume(bootstrap: str, topic: str, partitions: int, count: int, **limits: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
        fetch_max_wait_ms=50,
        **limits,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        for message in consumer:
            values.append(message.value)
            if len(values) == count:
                break
        return values
    finally:
        consumer.close()


@pytest.mark.timeout(90)
async def test_fetch_responses_respect_fetch_max_bytes_and_partition_max_bytes(tmp_path: Path) -> None:
    async with inproc_broker(tmp_path) as (broker, proxy):
        topic = await broker.topics.create("limits", 4, {})
        for i in range(24):
            value = bytes([65 + i % 26]) * BATCH_VALUE
            await broker.store.append(topic.streams[i % 4], make_batch([value]), 1)
        values = await asyncio.to_thread(
            _consume,
            f"127.0.0.1:{proxy.port}",
            "limits",
            4,
            24,
            fetch_max_bytes=25_000,
            max_partition_fetch_bytes=16_000,
        )
        assert len(values) == 24
        fetch_sizes = [size for size in proxy.response_sizes if size > BATCH_VALUE]
        assert fetch_sizes, "the consumer fetched through the proxy"
        assert max(fetch_sizes) <= 25_000 + FRAMING


@pytest.mark.timeout(90)
async def test_a_batch_larger_than_every_limit_is_still_delivered_alone(tmp_path: Path) -> None:
    async with inproc_broker(tmp_path) as (broker, proxy):
        topic = await broker.topics.create("big", 2, {})
        await broker.store.append(topic.streams[0], make_batch([b"x" * 40_000]), 1)
        await broker.store.append(topic.streams[1], make_batch([b"y" * 40_000]), 1)
        values = await asyncio.to_thread(
            _consume,
            f"127.0.0.1:{proxy.port}",
            "big",
            2,
            2,
            fetch_max_bytes=20_000,
            max_partition_fetch_bytes=10_000,
        )
        assert sorted(v[:1] for v in values) == [b"x", b"y"]
        fetch_sizes = [size for size in proxy.response_sizes if size > 10_000]
        assert max(fetch_sizes) < 2 * 40_000  # one big batch per response, never both
