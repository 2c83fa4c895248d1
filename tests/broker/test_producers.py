"""Idempotent producer state survives a restart: snapshot plus replay of the stream tail."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.producers import ProducerStates
from tabletopic.records.header import validate_batches
from tabletopic.s3stream.streams import StreamError
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


async def test_a_produce_held_up_before_its_offsets_keeps_its_place(
    broker_service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests of one idempotent producer in flight, the first held up (a full WAL) before its
    batch has offsets: the second must not overtake it, or the stream holds sequence 1 before 0 and
    a new leader rebuilding the state from the stream expects the wrong sequence
    (OUT_OF_ORDER_SEQUENCE_NUMBER for the producer's next batch, fatal for librdkafka)."""
    await broker_service.topics.create("t", 1)
    store = broker_service.store
    held = [True]

    async def wait_for_room() -> None:
        if held[0]:
            held[0] = False
            for _ in range(5):
                await asyncio.sleep(0)  # loop turns, not a wait: room for the second request to overtake

    original_append = store.append

    async def append(stream_id: int, payload: bytes, record_count: int) -> int:
        await wait_for_room()
        return await original_append(stream_id, payload, record_count)

    monkeypatch.setattr(store, "wait_for_room", wait_for_room, raising=False)
    monkeypatch.setattr(store, "append", append)
    batches = [make_batch([b"x"], producer_id=7, producer_epoch=0, base_sequence=seq) for seq in (0, 1)]
    first, second = await asyncio.gather(*(call(broker_service, produce_request("t", 0, b)) for b in batches))
    assert (_partition(first).base_offset, _partition(second).base_offset) == (0, 1)
    stored = await store.fetch(broker_service.stream_id("t", 0), 0, 1 << 20)
    assert [validate_batches(b.payload)[0].base_sequence for b in stored] == [0, 1]
    broker_service.producers = await _restarted_states(broker_service)  # as a new leader does
    following = make_batch([b"x"], producer_id=7, producer_epoch=0, base_sequence=2)
    result = _partition(await call(broker_service, produce_request("t", 0, following)))
    assert (result.error_code, result.base_offset) == (ErrorCode.none, 2)


async def test_acknowledgements_out_of_order_never_move_the_snapshot_back(broker_service) -> None:
    """A snapshot records the newest acknowledged sequence with the offset it covers, even when
    an older batch's acknowledgement is recorded after a newer one's."""
    await broker_service.topics.create("t", 1)
    sid = broker_service.stream_id("t", 0)
    states = broker_service.producers
    older, newer = (
        validate_batches(make_batch([b"x"], producer_id=4, producer_epoch=0, base_sequence=seq))[0]
        for seq in (0, 1)
    )
    first, second = states.check(sid, older).reservation, states.check(sid, newer).reservation
    assert first is not None and second is not None
    states.committed(sid, 4, second, 1, 2)
    states.committed(sid, 4, first, 0, 1)
    await states.snapshot()
    assert states._read_snapshots()[sid][0] == 2
    restarted = await _restarted_states(broker_service)
    following = validate_batches(make_batch([b"x"], producer_id=4, producer_epoch=0, base_sequence=2))[0]
    assert restarted.check(sid, following).error_code is ErrorCode.none


async def test_batches_failed_in_flight_leave_their_sequences_free(broker_service) -> None:
    """An upload failure fails every batch in flight, reported oldest first: the producer's
    retries of them must be appended, not refused as already written (which librdkafka would
    take for delivered: lost data)."""
    await broker_service.topics.create("t", 1)
    sid = broker_service.stream_id("t", 0)
    states = broker_service.producers

    def header(seq: int):  # type: ignore[no-untyped-def]
        return validate_batches(make_batch([b"x"], producer_id=6, producer_epoch=0, base_sequence=seq))[0]

    written = states.check(sid, header(0)).reservation
    assert written is not None
    states.committed(sid, 6, written, 0, 1)
    in_flight = [states.check(sid, header(seq)).reservation for seq in (1, 2, 3)]
    for reservation in in_flight:
        assert reservation is not None
        states.failed(sid, 6, reservation, RuntimeError("the batch object upload failed"))
    retry = states.check(sid, header(1))
    assert (retry.error_code, retry.reservation is not None) == (ErrorCode.none, True)


async def test_a_replay_that_cannot_read_the_tail_refuses_to_guess(
    broker_service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new leader must not serve with a producer state that misses acknowledged batches."""
    await broker_service.topics.create("t", 1)
    batch = make_batch([b"x"], producer_id=2, producer_epoch=0, base_sequence=0)
    await call(broker_service, produce_request("t", 0, batch))

    async def nothing(*args: object, **kwargs: object) -> list[object]:
        return []

    monkeypatch.setattr(broker_service.store, "fetch", nothing)
    with pytest.raises(StreamError, match="read stopped at offset 0 of 1"):
        await _restarted_states(broker_service)


async def test_a_deposed_leaders_late_snapshot_does_not_replace_a_newer_one(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    sid = broker_service.stream_id("t", 0)
    for seq in range(2):
        batch = make_batch([b"x"], producer_id=8, producer_epoch=0, base_sequence=seq)
        await call(broker_service, produce_request("t", 0, batch))
    deposed = await _restarted_states(broker_service)  # its view: offsets up to 2
    deposed.note_append(sid, 2)
    later = make_batch([b"x"], producer_id=8, producer_epoch=0, base_sequence=2)
    await call(broker_service, produce_request("t", 0, later))
    await broker_service.producers.snapshot()  # the successor's, covering 3
    await deposed.snapshot()
    assert broker_service.producers._read_snapshots()[sid][0] == 3


def _header(producer_id: int, epoch: int, seq: int):  # type: ignore[no-untyped-def]
    return validate_batches(
        make_batch([b"x"], producer_id=producer_id, producer_epoch=epoch, base_sequence=seq)
    )[0]


async def test_after_a_new_epochs_first_batch_failed_only_its_retry_is_taken(broker_service) -> None:
    """Object WAL at a PostgreSQL restart, as a fault run traced it: librdkafka bumped its epoch and
    sent sequences 0, 1 and 2; the upload holding 0 failed before 1 was checked. Taking 1 then (the
    state had fallen back to "no sequence known") appended it where 0 would have been, and its
    acknowledgement made librdkafka count 0 as delivered although it was never written."""
    await broker_service.topics.create("t", 1)
    sid = broker_service.stream_id("t", 0)
    states = broker_service.producers
    old = states.check(sid, _header(8, 1, 0)).reservation
    assert old is not None
    states.committed(sid, 8, old, 0, 1)
    first = states.check(sid, _header(8, 2, 0)).reservation  # the bumped epoch starts at 0
    assert first is not None
    states.failed(sid, 8, first, RuntimeError("the batch object commit failed"))
    later = states.check(sid, _header(8, 2, 1))
    assert later.error_code is ErrorCode.out_of_order_sequence_number
    assert "expected 0" in later.message
    # So does a new leader that starts from the snapshot written meanwhile.
    await states.snapshot()
    restarted = await _restarted_states(broker_service)
    assert restarted.check(sid, _header(8, 2, 1)).error_code is ErrorCode.out_of_order_sequence_number
    assert states.check(sid, _header(8, 2, 0)).reservation is not None


async def test_a_producer_new_to_the_partition_is_held_to_its_first_sequence_once_seen(
    broker_service,
) -> None:
    """A producer the partition has no state for may start anywhere (Kafka's rule, for a producer
    whose state expired), but once its first batch is seen a later one may not overtake that batch's
    retry, failed or not."""
    await broker_service.topics.create("t", 1)
    sid = broker_service.stream_id("t", 0)
    states = broker_service.producers
    first = states.check(sid, _header(9, 0, 7)).reservation
    assert first is not None
    states.failed(sid, 9, first, RuntimeError("the batch object commit failed"))
    assert states.check(sid, _header(9, 0, 8)).error_code is ErrorCode.out_of_order_sequence_number
    assert states.check(sid, _header(9, 0, 7)).reservation is not None


async def test_a_fenced_instances_late_append_does_not_move_the_new_epoch(broker_service) -> None:
    """A transactional producer's old instance (epoch 0) still has an append in flight when the new
    instance (epoch 1, same producer id) begins at sequence 0. The old append completing must not
    make epoch 1 expect what follows epoch 0's sequence: when epoch 1's first batch then fails, its
    retry must be taken, not refused (which librdkafka treats as fatal)."""
    await broker_service.topics.create("t", 1)
    sid = broker_service.stream_id("t", 0)
    states = broker_service.producers
    zombie = states.check(sid, _header(10, 0, 5)).reservation
    fresh = states.check(sid, _header(10, 1, 0)).reservation
    assert zombie is not None and fresh is not None
    states.committed(sid, 10, zombie, 0, 1)
    states.failed(sid, 10, fresh, RuntimeError("the batch object commit failed"))
    assert states.check(sid, _header(10, 1, 0)).reservation is not None


async def test_a_batch_ahead_of_one_refused_before_leading_is_told_to_retry_not_out_of_order(
    broker_service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill -9 fault run: the new leader refused sequence 5 NOT_LEADER_OR_FOLLOWER (still
    rebuilding), then, ready, got 6 from the same producer. OUT_OF_ORDER_SEQUENCE_NUMBER there made
    librdkafka bump its epoch and number every unacknowledged batch again, and a batch of another
    partition whose first send had reached the killed leader's log was written twice. 6 is now told
    to retry, and the two land in order once 5 is sent again."""
    await broker_service.topics.create("t", 1)
    for seq in range(5):
        batch = make_batch([b"x"], producer_id=9, producer_epoch=0, base_sequence=seq)
        await call(broker_service, produce_request("t", 0, batch))
    batch = {seq: make_batch([b"x"], producer_id=9, producer_epoch=0, base_sequence=seq) for seq in (5, 6, 9)}
    leads = broker_service.leadership.leads
    monkeypatch.setattr(broker_service.leadership, "leads", lambda topic, partition: False)
    refused = _partition(await call(broker_service, produce_request("t", 0, batch[5])))
    assert refused.error_code is ErrorCode.not_leader_or_follower
    monkeypatch.setattr(broker_service.leadership, "leads", leads)
    ahead = _partition(await call(broker_service, produce_request("t", 0, batch[6])))
    assert ahead.error_code is ErrorCode.not_leader_or_follower
    for seq in (5, 6):
        result = _partition(await call(broker_service, produce_request("t", 0, batch[seq])))
        assert (result.error_code, result.base_offset) == (ErrorCode.none, seq)
    gap = _partition(await call(broker_service, produce_request("t", 0, batch[9])))
    assert gap.error_code is ErrorCode.out_of_order_sequence_number  # a gap nobody refused here
