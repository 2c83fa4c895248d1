"""Leader epochs as clients see them (KIP-101, KIP-320): Fetch stamps each batch with the epoch
that wrote it, and Fetch, ListOffsets and OffsetForLeaderEpoch check the epoch a client names."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.leadership import BrokerEndpoint, SingleNode
from tabletopic.records.header import HEADER
from tabletopic.s3stream.epochs import EpochHistory
from tests.support.broker_calls import call
from tests.support.kafka_requests import fetch_request, make_batch, produce_request, request


class _LeaderAtEpoch(SingleNode):
    """This broker leads everything at ``epoch`` (a cluster broker after some leader changes)."""

    def __init__(self, broker: Any, epoch: int) -> None:
        super().__init__(broker.node_id, lambda listener: BrokerEndpoint(broker.node_id, "localhost", 9092))
        self.epoch = epoch

    def serving_epoch(self, topic: str, partition: int) -> int | None:
        return self.epoch

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return self._node_id, self.epoch


async def _two_batches(broker: Any) -> None:
    await broker.topics.create("t", 1)
    for _ in range(2):
        await call(broker, produce_request("t", 0, make_batch([b"a", b"b"])))


async def _end_offset_for(broker: Any, leader_epoch: int, current: int = -1) -> Any:
    partition = {"partition": 0, "current_leader_epoch": current, "leader_epoch": leader_epoch}
    req = request(23, 4, replica_id=-1, topics=[{"topic": "t", "partitions": [partition]}])
    return (await call(broker, req)).topics[0].partitions[0]


def _with_epoch(req: Any, current: int) -> Any:
    partition = req.topics[0].partitions[0]
    object.__setattr__(partition, "current_leader_epoch", current)
    return req


async def test_one_node_is_epoch_zero_and_refuses_an_epoch_it_does_not_know(broker_service: Any) -> None:
    await _two_batches(broker_service)
    answer = await _end_offset_for(broker_service, 0)
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.none, 0, 4)
    assert (await _end_offset_for(broker_service, 0, current=1)).error_code == ErrorCode.unknown_leader_epoch
    newer = await _end_offset_for(broker_service, 3)
    assert (newer.leader_epoch, newer.end_offset) == (-1, -1)


async def test_every_leader_answers_where_an_earlier_epoch_ended(broker_service: Any) -> None:
    await _two_batches(broker_service)
    sid = broker_service.stream_id("t", 0)
    broker_service.store.epochs = lambda stream: EpochHistory(((3, 0), (5, 2)))  # 3 wrote 0-1, 5 the rest
    broker_service.leadership = _LeaderAtEpoch(broker_service, 5)
    assert sid is not None
    old = await _end_offset_for(broker_service, 3, current=5)
    assert (old.leader_epoch, old.end_offset) == (3, 2)
    between = await _end_offset_for(broker_service, 4, current=5)
    assert (between.leader_epoch, between.end_offset) == (3, 2)
    assert (await _end_offset_for(broker_service, 5, current=4)).error_code == ErrorCode.fenced_leader_epoch


EPOCH_CHECKS = [
    (-1, ErrorCode.none),  # names none
    (5, ErrorCode.none),
    (4, ErrorCode.fenced_leader_epoch),  # stale metadata: refresh
    (6, ErrorCode.unknown_leader_epoch),  # ahead of this broker: retry
]


@pytest.mark.parametrize(("current", "code"), EPOCH_CHECKS)
async def test_fetch_checks_the_epoch_the_client_names_and_stamps_each_batch_with_its_writer(
    broker_service: Any, current: int, code: ErrorCode
) -> None:
    await _two_batches(broker_service)
    broker_service.store.epochs = lambda stream: EpochHistory(((3, 0), (5, 2)))
    broker_service.leadership = _LeaderAtEpoch(broker_service, 5)
    answer = (
        (await call(broker_service, _with_epoch(fetch_request("t", 0, 0), current)))
        .responses[0]
        .partitions[0]
    )
    assert answer.error_code == code
    if code is not ErrorCode.none:
        return
    records = bytes(answer.records)
    first = HEADER.unpack_from(records, 0)
    second = HEADER.unpack_from(records, 12 + first[1])
    assert [(first[0], first[2]), (second[0], second[2])] == [(0, 3), (2, 5)]  # (base offset, epoch)


async def test_list_offsets_reports_the_epoch_of_the_offset_it_answers(broker_service: Any) -> None:
    await _two_batches(broker_service)
    broker_service.store.epochs = lambda stream: EpochHistory(((3, 0), (5, 2)))
    broker_service.leadership = _LeaderAtEpoch(broker_service, 5)
    for timestamp, epoch in ((-2, 3), (-1, 5)):
        partition = {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": 5}
        req = request(
            2, 7, replica_id=-1, isolation_level=0, topics=[{"name": "t", "partitions": [partition]}]
        )
        answer = (await call(broker_service, req)).topics[0].partitions[0]
        assert (answer.error_code, answer.leader_epoch) == (ErrorCode.none, epoch)
