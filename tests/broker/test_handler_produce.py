"""Produce: batch validation, idempotent sequences, LogAppendTime."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.partition_log import FAULT_ERROR_CODES
from tabletopic.records.errors import BatchFault
from tabletopic.records.header import validate_batches
from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request


async def _topic(broker, name="t", partitions=1, **configs):  # type: ignore[no-untyped-def]
    return await broker.topics.create(name, partitions, configs)


def _partition(response):  # type: ignore[no-untyped-def]
    return response.responses[0].partition_responses[0]


@pytest.mark.parametrize("version", range(3, 13))
async def test_produce_appends_and_returns_base_offsets_for_every_version(broker_service, version) -> None:
    await _topic(broker_service)
    first = _partition(await call(broker_service, produce_request("t", 0, make_batch([b"a", b"b"]), version)))
    second = _partition(await call(broker_service, produce_request("t", 0, make_batch([b"c"]), version)))
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 2)
    assert broker_service.high_watermark("t", 0) == 3


async def test_old_message_format_is_unsupported(broker_service) -> None:
    await _topic(broker_service)
    result = _partition(await call(broker_service, produce_request("t", 0, make_batch([b"a"], magic=1))))
    assert result.error_code is ErrorCode.unsupported_for_message_format


async def test_corrupted_batch_fails_the_crc_check(broker_service) -> None:
    await _topic(broker_service)
    batch = bytearray(make_batch([b"hello"]))
    batch[-2] ^= 0xFF
    result = _partition(await call(broker_service, produce_request("t", 0, bytes(batch))))
    assert result.error_code is ErrorCode.corrupt_message


async def test_truncated_batch_is_corrupt(broker_service) -> None:
    await _topic(broker_service)
    result = _partition(await call(broker_service, produce_request("t", 0, make_batch([b"hello"])[:-3])))
    assert result.error_code is ErrorCode.corrupt_message


async def test_batch_above_max_message_bytes_is_too_large(broker_service) -> None:
    await _topic(broker_service, **{"max.message.bytes": "200"})
    result = _partition(await call(broker_service, produce_request("t", 0, make_batch([b"x" * 500]))))
    assert result.error_code is ErrorCode.message_too_large


async def test_unknown_topic_and_partition_are_reported(broker_service) -> None:
    await _topic(broker_service)
    missing = _partition(await call(broker_service, produce_request("nope", 0, make_batch([b"a"]))))
    beyond = _partition(await call(broker_service, produce_request("t", 5, make_batch([b"a"]))))
    assert missing.error_code is beyond.error_code is ErrorCode.unknown_topic_or_partition


async def test_acks_zero_sends_no_response_but_appends(broker_service) -> None:
    await _topic(broker_service)
    assert await call(broker_service, produce_request("t", 0, make_batch([b"a"]), acks=0)) is None
    assert broker_service.high_watermark("t", 0) == 1


async def test_invalid_acks_value_is_refused(broker_service) -> None:
    await _topic(broker_service)
    result = _partition(await call(broker_service, produce_request("t", 0, make_batch([b"a"]), acks=2)))
    assert result.error_code is ErrorCode.invalid_required_acks


async def test_retried_idempotent_batch_returns_original_offset_without_appending(broker_service) -> None:
    await _topic(broker_service)
    batch = make_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    first = _partition(await call(broker_service, produce_request("t", 0, batch)))
    retry = _partition(await call(broker_service, produce_request("t", 0, batch)))
    assert first.error_code is retry.error_code is ErrorCode.none
    assert retry.base_offset == first.base_offset == 0
    assert broker_service.high_watermark("t", 0) == 2


async def _produce_as_producer_7(broker, epoch: int, sequence: int) -> ErrorCode:  # type: ignore[no-untyped-def]
    """Produce one record to t/0 as idempotent producer 7 at `epoch`, starting at `sequence`."""
    batch = make_batch([b"x"], producer_id=7, producer_epoch=epoch, base_sequence=sequence)
    return _partition(await call(broker, produce_request("t", 0, batch))).error_code


@pytest.mark.parametrize(
    ("first_epoch", "epoch", "sequence", "expected"),
    [
        pytest.param(0, 0, 5, ErrorCode.out_of_order_sequence_number, id="sequence-gap-is-out-of-order"),
        pytest.param(3, 2, 1, ErrorCode.invalid_producer_epoch, id="stale-epoch-is-fenced"),
        pytest.param(0, 1, 4, ErrorCode.out_of_order_sequence_number, id="new-epoch-not-at-zero"),
        pytest.param(0, 1, 0, ErrorCode.none, id="new-epoch-at-zero"),
    ],
)
async def test_a_producers_second_batch_is_checked_against_its_first(
    broker_service, first_epoch: int, epoch: int, sequence: int, expected: ErrorCode
) -> None:
    await _topic(broker_service)
    assert await _produce_as_producer_7(broker_service, first_epoch, 0) is ErrorCode.none
    assert await _produce_as_producer_7(broker_service, epoch, sequence) is expected


async def test_old_sequence_outside_the_cache_is_out_of_order(broker_service) -> None:
    """As Kafka answers; DUPLICATE_SEQUENCE_NUMBER would make librdkafka report the batch written."""
    await _topic(broker_service)
    for seq in range(8):
        assert await _produce_as_producer_7(broker_service, 0, seq) is ErrorCode.none
    assert await _produce_as_producer_7(broker_service, 0, 1) is ErrorCode.out_of_order_sequence_number


async def test_log_append_time_topic_stamps_batches_and_keeps_crc_valid(broker_service) -> None:
    await _topic(broker_service, **{"message.timestamp.type": "LogAppendTime"})
    result = _partition(await call(broker_service, produce_request("t", 0, make_batch([b"a"], timestamp=5))))
    assert result.error_code is ErrorCode.none
    append_ms = int(result.log_append_time.timestamp() * 1000)
    assert append_ms > 1_600_000_000_000
    stored = (await broker_service.store.fetch(broker_service.stream_id("t", 0), 0, 1 << 20))[0]
    (header,) = validate_batches(stored.payload)  # verifies the recomputed CRC
    assert header.attributes & 0x08
    assert header.max_timestamp == append_ms


async def test_every_batch_fault_has_its_error_code_and_an_empty_batch_is_an_invalid_record(
    broker_service,
) -> None:
    assert set(FAULT_ERROR_CODES) == set(BatchFault)
    await _topic(broker_service)
    result = _partition(await call(broker_service, produce_request("t", 0, make_batch([]))))
    assert result.error_code is ErrorCode.invalid_record
    assert result.error_message == "batch at byte 0 has record count 0 and last offset delta -1"
