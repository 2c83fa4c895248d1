"""retention.ms and retention.bytes move the log start offset forward at batch boundaries."""

from __future__ import annotations

import time

from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request


async def _fill(broker, name: str, timestamps: list[int], **configs: str) -> None:  # type: ignore[no-untyped-def]
    broker.retention.run_bytes = 1  # one batch per run: trims at every batch boundary
    await broker.topics.create(name, 1, configs)
    for ts in timestamps:
        await call(broker, produce_request(name, 0, make_batch([b"x" * 100, b"y" * 100], timestamp=ts)))


async def test_retention_ms_trims_batches_older_than_the_limit(broker_service) -> None:
    now = int(time.time() * 1000)
    old, recent = now - 3_600_000, now - 1000
    await _fill(broker_service, "t", [old, old, recent, recent], **{"retention.ms": "60000"})
    assert await broker_service.retention.enforce_all() == 1
    assert broker_service.log_start_offset("t", 0) == 4
    assert broker_service.high_watermark("t", 0) == 8
    assert await broker_service.retention.enforce_all() == 0  # nothing more to do


async def test_retention_bytes_keeps_the_newest_batches_within_the_limit(broker_service) -> None:
    now = int(time.time() * 1000)
    batch_size = len(make_batch([b"x" * 100, b"y" * 100]))
    await _fill(broker_service, "t", [now] * 5, **{"retention.bytes": str(2 * batch_size + 10)})
    await broker_service.retention.enforce_all()
    assert broker_service.log_start_offset("t", 0) == 6


async def test_everything_expired_leaves_an_empty_log_at_the_end(broker_service) -> None:
    await _fill(broker_service, "t", [1000, 2000], **{"retention.ms": "1000"})
    await broker_service.retention.enforce_all()
    assert broker_service.log_start_offset("t", 0) == broker_service.high_watermark("t", 0) == 4


async def test_compacted_and_unlimited_topics_are_left_alone(broker_service) -> None:
    await _fill(broker_service, "compacted", [1000], **{"retention.ms": "1", "cleanup.policy": "compact"})
    await _fill(broker_service, "forever", [1000], **{"retention.ms": "-1"})
    assert await broker_service.retention.enforce_all() == 0


async def test_broker_default_retention_applies_to_topics_without_their_own(broker_service) -> None:
    await _fill(broker_service, "t", [1000, int(time.time() * 1000)])
    await broker_service.set_dynamic_configs({"log.retention.ms": "60000"})
    await broker_service.retention.enforce_all()
    assert broker_service.log_start_offset("t", 0) == 2


async def test_trims_happen_at_run_boundaries_and_passes_read_only_new_data(broker_service) -> None:
    now = int(time.time() * 1000)
    await _fill(broker_service, "t", [now - 3_600_000] * 3, **{"retention.ms": "60000"})
    batch_size = len(make_batch([b"x" * 100, b"y" * 100]))
    broker_service.retention.run_bytes = 2 * batch_size  # runs of two batches
    await call(broker_service, produce_request("t", 0, make_batch([b"x" * 100, b"y" * 100], timestamp=now)))
    await broker_service.retention.enforce_all()
    # Runs: [batches 0-1] expired, [batch 2 old + batch 3 new] kept whole.
    assert broker_service.log_start_offset("t", 0) == 4
    fetches = []
    store = broker_service.store
    original = store.fetch

    async def counting_fetch(*args, **kwargs):  # type: ignore[no-untyped-def]
        fetches.append(args[1])
        return await original(*args, **kwargs)

    store.fetch = counting_fetch
    await broker_service.retention.enforce_all()
    assert fetches == []  # nothing new since the last pass: nothing read


class _LeadsPartitionZero:
    """A broker of a cluster leading only partition 0 of every topic (the others' leaders trim them)."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self._inner = inner

    def leads(self, topic: str, partition: int) -> bool:
        return partition == 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._inner, name)


async def test_partitions_led_elsewhere_or_never_written_are_skipped_without_a_warning_each(
    broker_service, caplog
) -> None:
    # 10,000 partitions on 3 brokers logged a WARNING per partition the broker did not hold at
    # every pass; the leader trims each, and an empty stream has nothing to trim.
    await broker_service.topics.create("many", 40, {"retention.ms": "60000"})
    await broker_service.topics.create("empty", 3, {"retention.ms": "60000"})
    broker_service.leadership = _LeadsPartitionZero(broker_service.leadership)
    store = broker_service.store
    for stream_id in broker_service.topics.get("many").streams[20:]:
        del store._streams[stream_id]  # as a cluster broker's store: only what it opened
    reads = []
    original = store.fetch

    async def counting_fetch(*args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(args[0])
        return await original(*args, **kwargs)

    store.fetch = counting_fetch
    caplog.set_level("INFO", logger="tabletopic.broker.retention")
    for _ in range(3):
        assert await broker_service.retention.enforce_all() == 0
    assert [r for r in caplog.records if r.levelname == "WARNING"] == []
    assert reads == []  # "empty"-0 and "many"-0 were never written: nothing read


async def test_a_stream_this_broker_does_not_hold_is_mentioned_once_per_interval(
    broker_service, caplog
) -> None:
    await broker_service.topics.create("t", 4, {"retention.ms": "60000"})
    store = broker_service.store
    for stream_id in broker_service.topics.get("t").streams[1:]:
        del store._streams[stream_id]  # leadership says it leads them, but they are not open yet
    caplog.set_level("INFO", logger="tabletopic.broker.retention")
    for _ in range(3):
        await broker_service.retention.enforce_all()
    lines = [r.getMessage() for r in caplog.records if r.name == "tabletopic.broker.retention"]
    assert lines == [
        "retention left out 3 partitions whose streams this broker does not hold (yet); "
        "0 more are led by other brokers, which trim them"
    ]
