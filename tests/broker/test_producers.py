"""Idempotent producer state survives a restart: snapshot plus replay of the stream tail."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tabletopic.broker.producers import ProducerStates
from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request


def _partition(response):  # type: ignore[no-untyped-def]
    return response.responses[0].partition_responses[0]


async def _restarted_states(broker) -> ProducerStates:  # type: ignore[no-untyped-def]
    states = ProducerStates(broker.topics._engine, broker.store)
    await states.recover([s for t in broker.topics.all() for s in t.streams])
    return states


async def test_state_is_rebuilt_from_snapshot_and_tail(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    for seq in range(3):
        batch = make_batch([b"x"], producer_id=9, producer_epoch=0, base_sequence=seq)
        await call(broker_service, produce_request("t", 0, batch))
    await broker_service.producers.snapshot()
    for seq in range(3, 5):  # appended after the snapshot: only the replay knows them
        batch = make_batch([b"x"], producer_id=9, producer_epoch=0, base_sequence=seq)
        await call(broker_service, produce_request("t", 0, batch))
    broker_service.producers = await _restarted_states(broker_service)
    retry = make_batch([b"x"], producer_id=9, producer_epoch=0, base_sequence=4)
    result = _partition(await call(broker_service, produce_request("t", 0, retry)))
    assert (result.error_code, result.base_offset) == (ErrorCode.none, 4)
    following = make_batch([b"x"], producer_id=9, producer_epoch=0, base_sequence=5)
    assert _partition(await call(broker_service, produce_request("t", 0, following))).base_offset == 5
    assert broker_service.high_watermark("t", 0) == 6


async def test_state_is_rebuilt_without_any_snapshot(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    batch = make_batch([b"x", b"y"], producer_id=3, producer_epoch=1, base_sequence=0)
    await call(broker_service, produce_request("t", 0, batch))
    broker_service.producers = await _restarted_states(broker_service)
    gap = make_batch([b"z"], producer_id=3, producer_epoch=1, base_sequence=7)
    assert _partition(await call(broker_service, produce_request("t", 0, gap))).error_code is (
        ErrorCode.out_of_order_sequence_number
    )


async def test_idle_producers_expire(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    batch = make_batch([b"x"], producer_id=5, producer_epoch=0, base_sequence=0)
    await call(broker_service, produce_request("t", 0, batch))
    assert broker_service.producers.expire(3600) == 0
    assert broker_service.producers.expire(0) == 1
    # Forgotten: any sequence is accepted again, like from a new producer.
    later = make_batch([b"y"], producer_id=5, producer_epoch=0, base_sequence=9)
    assert _partition(await call(broker_service, produce_request("t", 0, later))).error_code is ErrorCode.none


async def test_streams_without_idempotent_producers_are_snapshotted_too(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    await call(broker_service, produce_request("t", 0, make_batch([b"plain"])))
    await broker_service.producers.snapshot()
    snapshots = broker_service.producers._read_snapshots()
    assert snapshots[broker_service.stream_id("t", 0)][0] == 1
