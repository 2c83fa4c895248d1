"""Log compaction: the cleaning rules on batches (pure), and with a real broker and a real consumer
the latest value of every key survives cleaning, also when a kill -9 interrupts a cleaning pass."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tabletopic.broker.log_cleaner import CleaningRules, CleaningStats, compact_batches
from tabletopic.crashpoints import ENV
from tabletopic.records.encoder import Record, build_batch
from tabletopic.records.header import parse_stored_header
from tabletopic.s3stream.streams import StoredBatch
from tests.support.broker_process import BrokerProcess
from tests.support.decoded_batches import decoded
from tests.support.waiting import wait_until_sync

NOW = 1_700_000_100_000


def _batch(base: int, records: list[tuple[bytes, bytes | None]], stamp: int = NOW - 60_000) -> StoredBatch:
    payload = build_batch([Record(k, v, (), stamp + i) for i, (k, v) in enumerate(records)])
    return StoredBatch(base, len(records), payload)


def _rules(**overrides: int) -> CleaningRules:
    values = {"cleanable_end": 1 << 40, "now_ms": NOW, "min_lag_ms": 0, "delete_retention_ms": 86_400_000}
    values.update(overrides)
    return CleaningRules(**values)


def test_only_the_latest_value_of_each_key_survives_and_offsets_stay() -> None:
    batches = [_batch(0, [(b"a", b"1"), (b"b", b"1")]), _batch(2, [(b"a", b"2"), (b"c", b"1")])]
    stats = CleaningStats()
    cleaned = compact_batches(batches, _rules(), stats)
    assert [(b.base_offset, b.record_count) for b in cleaned] == [(0, 2), (2, 2)]
    assert decoded(cleaned) == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1")]
    assert (stats.records_before, stats.records_after) == (4, 3)
    assert parse_stored_header(cleaned[0].payload).last_offset_delta == 1  # the span is kept


def test_a_batch_never_becomes_empty() -> None:
    batches = [_batch(0, [(b"a", b"1")]), _batch(1, [(b"a", b"2")])]
    assert decoded(compact_batches(batches, _rules())) == [(0, b"a", b"1"), (1, b"a", b"2")]


def test_tombstones_go_after_delete_retention_ms() -> None:
    batches = [_batch(0, [(b"a", b"1"), (b"b", b"1")]), _batch(2, [(b"a", None), (b"b", b"2")])]
    assert decoded(compact_batches(batches, _rules())) == [(1, b"b", b"1"), (2, b"a", None), (3, b"b", b"2")]
    gone = compact_batches(batches, _rules(delete_retention_ms=1_000))
    assert decoded(gone) == [(1, b"b", b"1"), (3, b"b", b"2")]


def test_recent_records_and_records_past_the_last_stable_offset_are_not_compacted() -> None:
    batches = [_batch(0, [(b"a", b"1")]), _batch(1, [(b"a", b"2")]), _batch(2, [(b"a", b"3")], stamp=NOW)]
    assert len(decoded(compact_batches(batches, _rules(min_lag_ms=30_000)))) == 3
    assert len(decoded(compact_batches(batches, _rules(cleanable_end=2)))) == 2 + 1


@pytest.fixture
def compacting_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path / "cleaner",
        {
            "admin.listener": "",
            "log.cleaner.backoff.ms": "300",
            "s3stream.upload.interval.ms": "100",
            "s3stream.compaction.interval.ms": "3600000",  # only the cleaner rewrites objects
        },
    )
    yield process
    process.stop()


def _fill(bootstrap: str, topic: str, keys: int, rounds: int) -> dict[bytes, list[bytes]]:
    """Produce ``rounds`` values for each key; per key, the values from its last acknowledged one
    on (a crash point may kill the broker mid-fill: what was never acknowledged may or may not be
    stored, but nothing before the last acknowledged value may come back)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "100"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 10_000})
    allowed: dict[bytes, list[bytes]] = {}

    def delivered(err: Any, message: Any) -> None:
        values = allowed[message.key()]
        if err is None and message.value() in values:  # acknowledged: older values are stale
            del values[: values.index(message.value())]

    for r in range(rounds):
        for k in range(keys):
            key, value = f"k{k}".encode(), f"v{r}".encode()
            allowed.setdefault(key, []).append(value)
            producer.produce(topic, value, key, partition=0, on_delivery=delivered)
        if producer.flush(30):  # the broker is gone: stop
            break
    producer.flush(15)
    return allowed


def _latest(allowed: dict[bytes, list[bytes]]) -> dict[bytes, bytes]:
    return {key: values[-1] for key, values in allowed.items()}


def _agrees(read: dict[bytes, bytes], allowed: dict[bytes, list[bytes]]) -> bool:
    return read.keys() == allowed.keys() and all(read[k] in allowed[k] for k in allowed)


def _read_all(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    (_low, high) = consumer.get_watermark_offsets(TopicPartition(topic, 0), 30)
    result = []
    try:
        while True:
            message = consumer.poll(2)
            if message is None:
                break
            if message.error() is None:
                result.append((message.key(), message.value()))
                if message.offset() >= high - 1:
                    break
    finally:
        consumer.close()
    return result


def _wait_cleaned(bootstrap: str, topic: str, before: int, timeout: float = 40) -> list[tuple[bytes, bytes]]:
    records: list[tuple[bytes, bytes]] = []

    def cleaned() -> bool:
        records[:] = _read_all(bootstrap, topic)
        return len(records) < before

    with contextlib.suppress(TimeoutError):  # the caller's assertions say what is still there
        wait_until_sync(cleaned, timeout=timeout, interval=0.5)
    return records


@pytest.mark.integration
def test_cleaner_keeps_the_latest_value_of_every_key(compacting_broker: BrokerProcess) -> None:
    compacting_broker.start()
    topic = f"cleaned-{uuid.uuid4().hex[:8]}"
    latest = _latest(_fill(compacting_broker.bootstrap, topic, 10, 20))
    records = _wait_cleaned(compacting_broker.bootstrap, topic, 200)
    assert len(records) < 200
    assert dict(records) == latest  # the last value read per key is its latest


@pytest.mark.integration
def test_kill_during_a_cleaning_pass_loses_no_latest_value(
    compacting_broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "compaction.after_put")  # new objects written, swap not committed
    compacting_broker.start()
    topic = f"killed-{uuid.uuid4().hex[:8]}"
    allowed = _fill(compacting_broker.bootstrap, topic, 10, 20)
    assert compacting_broker.process is not None
    assert compacting_broker.process.wait(60) != 0
    compacting_broker.process = None
    monkeypatch.delenv(ENV)
    compacting_broker.start()
    before = dict(_read_all(compacting_broker.bootstrap, topic))
    assert _agrees(before, allowed), (before, allowed)
    records = _wait_cleaned(compacting_broker.bootstrap, topic, 200)
    assert len(records) < 200 and dict(records) == before


async def test_cleaner_rewrites_a_compacted_partition_of_the_memory_store(broker_service) -> None:  # type: ignore[no-untyped-def]
    topic = await broker_service.topics.create("mem", 1, {"cleanup.policy": "compact"})
    stream = topic.streams[0]
    for round_ in range(3):
        payload = build_batch([Record(b"k", f"v{round_}".encode(), (), NOW - 60_000)])
        await broker_service.store.append(stream, payload, 1)
    assert await broker_service.log_cleaner.clean_due() > 0
    batches = await broker_service.store.fetch(stream, 0, 1 << 20)
    assert [b.base_offset for b in batches] == [0, 1, 2]  # offsets kept; no batch emptied
    assert decoded(batches)[-1] == (2, b"k", b"v2")


async def test_a_pass_whose_rewrite_lost_a_race_is_retried(broker_service, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A store rewrite that returns 0 (its swap lost a race with an upload or another compaction)
    cleaned nothing: the partition stays due, and the next pass rewrites it, with no new data."""
    topic = await broker_service.topics.create("raced", 1, {"cleanup.policy": "compact"})
    stream = topic.streams[0]
    for round_ in range(3):
        payload = build_batch([Record(b"k", f"v{round_}".encode(), (), NOW - 60_000)])
        await broker_service.store.append(stream, payload, 1)
    store = broker_service.store
    real_rewrite = store.rewrite

    async def lost_race(stream_id, transform):  # type: ignore[no-untyped-def]
        transform(await store.fetch(stream_id, 0, 1 << 20))  # the transform ran; the swap did not
        return 0

    monkeypatch.setattr(store, "rewrite", lost_race)
    assert await broker_service.log_cleaner.clean_due() == 0
    monkeypatch.setattr(store, "rewrite", real_rewrite)
    assert await broker_service.log_cleaner.clean_due() > 0
    assert decoded(await store.fetch(stream, 0, 1 << 20))[-1] == (2, b"k", b"v2")
