"""Fetch sessions (KIP-227) with kafka-python, which uses them by default: after the first full
fetch the consumer's requests shrink to what changed, and every record still arrives exactly once,
also records appended to partitions the incremental requests no longer name."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.support.inproc_broker import inproc_broker
from tests.support.kafka_requests import make_batch
from tests.support.waiting import wait_until

PARTITIONS = 12
FETCH = 1


def _consume(bootstrap: str, count: int, appended: asyncio.Event | None = None) -> list[tuple[int, int]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([TopicPartition("many", p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        seen: list[tuple[int, int]] = []
        for message in consumer:
            seen.append((message.partition, message.offset))
            if len(seen) == count:
                break
        return seen
    finally:
        consumer.close()


@pytest.mark.timeout(90)
async def test_incremental_fetches_send_only_changes_and_lose_nothing(tmp_path: Path) -> None:
    async with inproc_broker(tmp_path) as (broker, proxy):
        topic = await broker.topics.create("many", PARTITIONS, {})
        for i in range(PARTITIONS * 3):
            await broker.store.append(topic.streams[i % PARTITIONS], make_batch([b"v%d" % i]), 1)

        async def append_later() -> None:
            # The consumer has read everything and is idle on incremental fetches.
            await wait_until(
                lambda: len(broker.fetch_sessions) >= 1 and sum(key == 1 for key, _ in proxy.requests) >= 10,
                timeout=30,
                message="idle incremental fetches",
            )
            for p in range(PARTITIONS):
                await broker.store.append(topic.streams[p], make_batch([b"late"]), 1)

        late = asyncio.ensure_future(append_later())
        seen = await asyncio.to_thread(_consume, f"127.0.0.1:{proxy.port}", PARTITIONS * 4)
        await late
    assert sorted(seen) == sorted((p, o) for p in range(PARTITIONS) for o in range(4))
    assert len(broker.fetch_sessions) >= 1
    fetch_sizes = [size for key, size in proxy.requests if key == FETCH]
    assert min(fetch_sizes) * 3 < max(fetch_sizes)  # incremental requests name no idle partition


def test_session_epochs_follow_kafkas_rules() -> None:
    from types import SimpleNamespace

    from kio.schema.errors import ErrorCode

    from tabletopic.broker.fetch_sessions import FetchSessionCache

    def request(session_id: int, epoch: int, partitions: list[int], forgotten: list[int] = ()) -> object:  # type: ignore[assignment]
        wanted = [
            SimpleNamespace(partition=p, fetch_offset=0, partition_max_bytes=100, current_leader_epoch=-1)
            for p in partitions
        ]
        return SimpleNamespace(
            session_id=session_id,
            session_epoch=epoch,
            topics=[SimpleNamespace(topic="t", partitions=wanted)],
            forgotten_topics_data=[SimpleNamespace(topic="t", partitions=list(forgotten))],
        )

    cache = FetchSessionCache(max_sessions=1)
    assert cache.resolve(request(0, -1, [0]), 12).session is None  # sessionless
    opened = cache.resolve(request(0, 0, [0, 1]), 12).session
    assert opened is not None
    sid = opened.session_id
    step = cache.resolve(request(sid, 1, [2], forgotten=[0]), 12)
    assert step.incremental and [key for key, _ in step.partitions] == [("t", 1), ("t", 2)]
    assert cache.resolve(request(sid, 1, []), 12).error is ErrorCode.invalid_fetch_session_epoch
    assert cache.resolve(request(sid + 7, 1, []), 12).error is ErrorCode.fetch_session_id_not_found
    cache.resolve(request(0, 0, [5]), 12)  # a second session evicts the first (one slot)
    assert cache.resolve(request(sid, 2, []), 12).error is ErrorCode.fetch_session_id_not_found
