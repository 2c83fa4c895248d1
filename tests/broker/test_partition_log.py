"""The partition log on its own: appends without a Produce request or handler, over the broker
service or over a stand-in host that is no BrokerService (the log sees its broker only through the
``LogHost`` Protocol), and the append result's stored hand-over shape."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.partition_log import AppendResult, PartitionLog
from tabletopic.broker.record_validation import RecordError
from tabletopic.records.encoder import Record, build_batch
from tests.support.kafka_requests import make_batch


async def test_append_gives_offsets_in_order_without_a_request(broker_service: Any) -> None:
    await broker_service.topics.create("t", 1, {})
    log: PartitionLog = broker_service.partition_log
    first = await log.append("t", 0, make_batch([b"a", b"b"]))
    second = await log.append("t", 0, make_batch([b"c"]))
    assert (first.error_code, first.base_offset, first.log_start_offset) == (ErrorCode.none, 0, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 2)
    assert broker_service.high_watermark("t", 0) == 3


async def test_retried_idempotent_batch_is_answered_with_its_original_offset(broker_service: Any) -> None:
    await broker_service.topics.create("t", 1, {})
    log: PartitionLog = broker_service.partition_log
    batch = make_batch([b"x"], producer_id=7, producer_epoch=0, base_sequence=0)
    await log.append("t", 0, make_batch([b"before"]))
    first = await log.append("t", 0, batch)
    retry = await log.append("t", 0, batch)
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 1)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.none, 1)
    assert broker_service.high_watermark("t", 0) == 2


async def test_transactional_batch_without_a_transactional_id_is_refused(broker_service: Any) -> None:
    await broker_service.topics.create("t", 1, {})
    payload = build_batch(
        [Record(b"k", b"v")], producer_id=3, producer_epoch=0, base_sequence=0, transactional=True
    )
    result = await broker_service.partition_log.append("t", 0, payload)
    assert result.error_code is ErrorCode.invalid_txn_state
    assert broker_service.high_watermark("t", 0) == 0


async def test_compacted_topic_names_keyless_records_in_record_errors(broker_service: Any) -> None:
    await broker_service.topics.create("c", 1, {"cleanup.policy": "compact"})
    payload = build_batch([Record(b"k", b"1"), Record(None, b"2"), Record(None, b"3")])
    result = await broker_service.partition_log.append("c", 0, payload)
    assert result.error_code is ErrorCode.invalid_record
    assert [e.batch_index for e in result.record_errors] == [1, 2]
    assert broker_service.high_watermark("c", 0) == 0


async def test_a_broker_not_leading_the_partition_names_the_leader_and_appends_nothing() -> None:
    """A stand-in host, not a BrokerService: what the log reads of its broker is the Protocol."""
    appended: list[Any] = []
    leadership = SimpleNamespace(leads=lambda topic, partition: False, leader=lambda topic, partition: (2, 5))
    topic = SimpleNamespace(name="t", partition_count=1, streams=[11], configs={})
    host = SimpleNamespace(
        node_id=1,
        clustered=True,
        topics=SimpleNamespace(get=lambda name: topic if name == "t" else None),
        leadership=leadership,
        store=SimpleNamespace(start_append=lambda *args: appended.append(args)),
        # The refused batches' sequences, kept so that a later one of the producer is refused too.
        producers=SimpleNamespace(
            note_refused=lambda stream, headers: refused.append((stream, len(headers)))
        ),
    )
    refused: list[tuple[int, int]] = []
    log = PartitionLog(host)
    result = await log.append("t", 0, make_batch([b"a"]))
    assert result.error_code is ErrorCode.not_leader_or_follower
    assert result.error_message == "broker 1 does not lead t-0 (broker 2 does, epoch 5)"
    assert refused == [(11, 1)]
    missing = await log.append("t", 1, make_batch([b"a"]))
    assert missing.error_code is ErrorCode.unknown_topic_or_partition
    assert appended == []


@pytest.mark.parametrize(
    "result",
    [
        AppendResult(base_offset=42, log_append_time=1_700_000_000_000, log_start_offset=3),
        AppendResult.failed(ErrorCode.invalid_record, "no", (RecordError(0, "no key"), RecordError(2, "x"))),
        AppendResult.failed(ErrorCode.not_leader_or_follower, "moved"),
    ],
)
def test_append_result_survives_the_stored_hand_over_answer(result: AppendResult) -> None:
    """The zone router stores a result as JSON in the shape of a Produce partition response (the
    shape brokers of the previous release write and read) and reads it back unchanged."""
    stored = {**result.response(4), "error_code": int(result.error_code)}
    answer = json.loads(json.dumps(stored))
    assert set(answer) - {"record_errors"} == {
        "index", "error_code", "error_message", "base_offset", "log_append_time", "log_start_offset"
    }  # fmt: skip
    assert ("record_errors" in answer) == bool(result.record_errors)
    assert AppendResult.from_response(answer) == result
