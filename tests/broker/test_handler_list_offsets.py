"""ListOffsets: earliest, latest, by timestamp, max timestamp."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request, request


async def _fill(broker) -> None:  # type: ignore[no-untyped-def]
    await broker.topics.create("t", 1)
    for i in range(10):  # batch i holds offsets 2i, 2i+1 with timestamps 1000*i, 1000*i + 1
        await call(broker, produce_request("t", 0, make_batch([b"a", b"b"], timestamp=1000 * i)))


async def _offset(broker, timestamp: int, version: int = 7):  # type: ignore[no-untyped-def]
    req = request(
        2,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}],
            }
        ],
    )
    return (await call(broker, req)).topics[0].partitions[0]


@pytest.mark.parametrize("version", range(1, 10))
async def test_latest_and_earliest_in_every_version(broker_service, version) -> None:
    await _fill(broker_service)
    assert (await _offset(broker_service, -1, version)).offset == 20
    assert (await _offset(broker_service, -2, version)).offset == 0


async def test_offset_by_timestamp_finds_the_first_batch_at_or_after_it(broker_service) -> None:
    await _fill(broker_service)
    found = await _offset(broker_service, 4500)
    assert (found.error_code, found.offset) == (ErrorCode.none, 10)
    exact = await _offset(broker_service, 3000)
    assert (exact.offset, exact.timestamp) == (6, 3000)


async def test_timestamp_after_everything_returns_minus_one(broker_service) -> None:
    await _fill(broker_service)
    assert (await _offset(broker_service, 10**12)).offset == -1


async def test_max_timestamp_returns_the_last_record_of_the_newest_batch(broker_service) -> None:
    await _fill(broker_service)
    result = await _offset(broker_service, -3)
    assert (result.offset, result.timestamp) == (19, 9001)


async def test_earliest_follows_trimming(broker_service) -> None:
    await _fill(broker_service)
    await broker_service.store.trim(broker_service.stream_id("t", 0), 6)
    assert (await _offset(broker_service, -2)).offset == 6


async def test_unknown_partition(broker_service) -> None:
    req = request(
        2,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=[{"name": "none", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    )
    result = (await call(broker_service, req)).topics[0].partitions[0]
    assert result.error_code is ErrorCode.unknown_topic_or_partition
