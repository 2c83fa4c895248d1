"""Fetch: patched base offsets, long polls, limits, errors, topic ids."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import time

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.handlers.fetch import PartitionRead
from tabletopic.records.header import validate_batches
from tests.support.broker_calls import call
from tests.support.kafka_requests import fetch_request, make_batch, produce_request


async def _fill(broker, batches: int = 3) -> None:  # type: ignore[no-untyped-def]
    await broker.topics.create("t", 1)
    for i in range(batches):
        await call(broker, produce_request("t", 0, make_batch([b"v%d" % i, b"w%d" % i])))


def _partition(response):  # type: ignore[no-untyped-def]
    return response.responses[0].partitions[0]


@pytest.mark.parametrize("version", range(4, 13))
async def test_fetch_returns_batches_with_their_stored_offsets(broker_service, version) -> None:
    await _fill(broker_service)
    result = _partition(await call(broker_service, fetch_request("t", 0, 2, version=version)))
    assert result.error_code is ErrorCode.none
    assert result.high_watermark == 6
    headers = validate_batches(result.records)
    offsets = [struct.unpack_from(">q", result.records, h.position)[0] for h in headers]
    assert offsets == [2, 4]


@pytest.mark.parametrize("version", [13, 16])
async def test_fetch_by_topic_id_for_v13_and_later(broker_service, version) -> None:
    await _fill(broker_service, 1)
    topic_id = broker_service.topics.get("t").topic_id
    response = await call(broker_service, fetch_request("t", 0, 0, version=version, topic_id=topic_id))
    assert response.responses[0].topic_id == topic_id
    assert _partition(response).error_code is ErrorCode.none
    assert len(validate_batches(_partition(response).records)) == 1


async def test_unknown_topic_id_is_reported(broker_service) -> None:
    import uuid

    response = await call(broker_service, fetch_request("t", 0, 0, version=13, topic_id=uuid.uuid4()))
    assert _partition(response).error_code is ErrorCode.unknown_topic_id


async def test_fetch_at_the_end_returns_empty_records_not_null(broker_service) -> None:
    await _fill(broker_service, 1)
    result = _partition(await call(broker_service, fetch_request("t", 0, 2)))
    assert result.error_code is ErrorCode.none
    assert result.records == b""


async def test_offset_beyond_the_end_is_out_of_range(broker_service) -> None:
    await _fill(broker_service, 1)
    result = _partition(await call(broker_service, fetch_request("t", 0, 99)))
    assert result.error_code is ErrorCode.offset_out_of_range
    assert result.records == b""


async def test_offset_below_log_start_is_out_of_range(broker_service) -> None:
    await _fill(broker_service, 3)
    await broker_service.store.trim(broker_service.stream_id("t", 0), 4)
    result = _partition(await call(broker_service, fetch_request("t", 0, 0)))
    assert result.error_code is ErrorCode.offset_out_of_range
    assert result.log_start_offset == 4


async def test_long_poll_wakes_up_when_data_arrives(broker_service) -> None:
    await _fill(broker_service, 0)

    async def produce_later() -> None:
        await asyncio.sleep(0.2)  # the subject: the fetch must park this long, then wake on the data
        await call(broker_service, produce_request("t", 0, make_batch([b"late"])))

    started = time.monotonic()
    producer = asyncio.create_task(produce_later())
    result = _partition(await call(broker_service, fetch_request("t", 0, 0, max_wait=5000)))
    await producer
    assert 0.15 < time.monotonic() - started < 3
    assert len(validate_batches(result.records)) == 1


async def test_long_poll_gives_up_after_max_wait(broker_service) -> None:
    await _fill(broker_service, 0)
    started = time.monotonic()
    result = _partition(await call(broker_service, fetch_request("t", 0, 0, max_wait=300)))
    assert 0.25 < time.monotonic() - started < 2
    assert result.records == b""


async def test_partition_max_bytes_limits_but_returns_at_least_one_batch(broker_service) -> None:
    await _fill(broker_service, 5)
    one = _partition(await call(broker_service, fetch_request("t", 0, 0, partition_max_bytes=10)))
    assert len(validate_batches(one.records)) == 1
    size = len(make_batch([b"v0", b"w0"]))
    two = _partition(await call(broker_service, fetch_request("t", 0, 0, partition_max_bytes=2 * size)))
    assert len(validate_batches(two.records)) == 2


async def test_missing_topic_is_unknown(broker_service) -> None:
    result = _partition(await call(broker_service, fetch_request("absent", 0, 0)))
    assert result.error_code is ErrorCode.unknown_topic_or_partition


async def test_nonzero_session_id_is_not_found(broker_service) -> None:
    from tests.support.kafka_requests import request

    req = request(
        1,
        11,
        max_wait=0,
        min_bytes=1,
        max_bytes=1000,
        session_id=5,
        session_epoch=1,
        topics=[],
        forgotten_topics_data=[],
        rack_id="",
    )
    response = await call(broker_service, req)
    assert response.error_code is ErrorCode.fetch_session_id_not_found


def test_a_partition_read_starts_with_every_field_at_its_declared_default() -> None:
    """PartitionRead's __init__ is written out (a Fetch makes one per partition it names): a field
    added to it or to the encoder's FetchedPartition without a line there fails here, not in an
    answer."""
    read = PartitionRead(4, 100, 1 << 20, ("orders", 4))
    given = {"partition_index": 4, "fetch_offset": 100, "max_bytes": 1 << 20, "key": ("orders", 4)}
    for field in dataclasses.fields(PartitionRead):
        expected = given.get(field.name, field.default)
        assert getattr(read, field.name) == expected, field.name
