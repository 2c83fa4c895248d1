"""Long polls over many partitions: one watch for the whole Fetch, and after it wakes only the
partitions whose streams woke it are read again, the others keeping what the read before it found."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.records.header import validate_batches
from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request, session_fetch_request
from tests.support.waiting import wait_until

PARTITIONS = 5


def _fetch(
    offsets: dict[int, int],
    *,
    session: tuple[int, int] = (0, -1),
    max_wait: int = 5000,
    min_bytes: int = 1,
    rack_id: str = "",
) -> Any:
    return session_fetch_request(
        "t", offsets, session=session, max_wait=max_wait, min_bytes=min_bytes, rack_id=rack_id
    )


def _answers(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def _offsets(partition: Any) -> list[int]:
    return [
        struct.unpack_from(">q", partition.records, h.position)[0]
        for h in validate_batches(partition.records)
    ]


async def _produce(broker: Any, partition: int, value: bytes) -> None:
    response = await call(broker, produce_request("t", partition, make_batch([value])))
    assert response.responses[0].partition_responses[0].error_code is ErrorCode.none


async def _polling(broker: Any, fetch: Any) -> asyncio.Task[Any]:
    """Start ``fetch`` and return once it is parked in its long poll."""
    task = asyncio.ensure_future(call(broker, fetch))
    streams = broker.topics.get("t").streams
    await wait_until(
        lambda: any(broker.store._streams[s].waiters._pending for s in streams),
        timeout=5,
        message="the fetch parked in its long poll",
    )
    return task


async def test_an_incremental_poll_answers_the_partitions_that_woke_it(broker_service) -> None:
    await broker_service.topics.create("t", PARTITIONS)
    await _produce(broker_service, 0, b"first")
    opened = await call(
        broker_service, _fetch(dict.fromkeys(range(PARTITIONS), 0), session=(0, 0), max_wait=0)
    )
    assert _offsets(_answers(opened)[0]) == [0]
    session = opened.session_id
    # The client moved partition 0 on; the session knows the others.
    poll = await _polling(broker_service, _fetch({0: 1}, session=(session, 1)))
    # Two appends before the poll resumes: both partitions are read again and answered.
    await asyncio.gather(_produce(broker_service, 3, b"late"), _produce(broker_service, 4, b"late"))
    answers = _answers(await poll)
    assert sorted(answers) == [3, 4]
    assert [(_offsets(answers[p]), answers[p].high_watermark) for p in (3, 4)] == [([0], 1), ([0], 1)]
    # Nothing was lost to the partial re-read: the next poll answers nothing new until an append.
    poll = await _polling(broker_service, _fetch({3: 1, 4: 1}, session=(session, 2)))
    await _produce(broker_service, 1, b"later")
    answers = _answers(await poll)
    assert sorted(answers) == [1] and _offsets(answers[1]) == [0]


async def test_min_bytes_counts_what_the_read_before_the_poll_found(broker_service) -> None:
    await broker_service.topics.create("t", PARTITIONS)
    await _produce(broker_service, 0, b"x" * 50)
    size = len(make_batch([b"x" * 50]))
    poll = await _polling(broker_service, _fetch({0: 0, 2: 0}, max_wait=5000, min_bytes=size + 1))
    await _produce(broker_service, 2, b"y" * 50)
    answers = _answers(await poll)
    assert _offsets(answers[0]) == [0] and _offsets(answers[2]) == [0]


async def test_a_stream_deleted_under_a_poll_ends_it_with_an_error(broker_service) -> None:
    await broker_service.topics.create("t", PARTITIONS)
    stream = broker_service.topics.get("t").streams[2]
    poll = await _polling(broker_service, _fetch({2: 0}, max_wait=30_000))
    await broker_service.store.delete_stream(stream)
    answer = _answers(await asyncio.wait_for(poll, 5))[2]
    assert answer.error_code is ErrorCode.unknown_topic_or_partition


class _SendElsewhere:
    """A zone router that sends every consumer to node 7 of its zone (KIP-392)."""

    routed_bytes: Any = None

    def zone_of(self, ctx: Any, rack_id: str | None = None) -> str | None:
        return rack_id or None

    def serves_here(self, zone: str | None) -> bool:
        return False

    def route(self, zone: str | None, leader: int, partition: int) -> int:
        return 7

    def count(self, zone: str | None, nbytes: int, direction: str) -> None:
        return None


async def test_a_consumer_sent_to_its_zone_is_answered_without_waiting(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    broker_service.zone_router = _SendElsewhere()
    fetch = _fetch({0: 0}, max_wait=30_000, rack_id="zone-b")
    answer = _answers(await asyncio.wait_for(call(broker_service, fetch), 5))[0]
    assert answer.preferred_read_replica == 7
    assert answer.records == b""
