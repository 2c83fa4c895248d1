"""The committed end of partitions for the table coordinator: ListOffsets latest answers the last
stable offset to a READ_COMMITTED request (as Kafka does), the aborted index in the metadata
database is written before that offset moves past an aborted transaction, and
:class:`CommittedOffsets` asks nobody for partitions led here and leaves out a partition whose
leader cannot be reached."""

from __future__ import annotations

import asyncio
import dataclasses

from kio.schema.errors import ErrorCode

from tabletopic.broker.leadership import BrokerEndpoint
from tabletopic.broker.transactions import TransactionCoordinator
from tabletopic.broker.transactions.stable import CommittedOffsets
from tabletopic.records.encoder import Record, build_batch
from tests.support.broker_calls import call
from tests.support.kafka_requests import produce_request, request
from tests.support.ports import free_port


async def _begin(broker, tid: str = "t1"):  # type: ignore[no-untyped-def]
    """A transaction on partition 0 of topic ``tx`` and its first batch's Produce request."""
    await broker.topics.create("tx", 2, {})
    coordinator: TransactionCoordinator = broker.transactions
    pid, epoch = await coordinator.init_producer_id(tid, 60_000, -1, -1)
    assert (await coordinator.add_partitions(tid, pid, epoch, [("tx", 0)])) == {("tx", 0): ErrorCode.none}
    batch = build_batch([Record(None, b"a")], transactional=True, producer_id=pid, producer_epoch=epoch)
    return coordinator, pid, epoch, dataclasses.replace(produce_request("tx", 0, batch), transactional_id=tid)


async def _open_txn(broker, tid: str = "t1"):  # type: ignore[no-untyped-def]
    coordinator, pid, epoch, produce = await _begin(broker, tid)
    response = await call(broker, produce)
    assert response.responses[0].partition_responses[0].error_code is ErrorCode.none
    return coordinator, pid, epoch


async def _latest(broker, isolation_level: int) -> int:  # type: ignore[no-untyped-def]
    answer = await call(
        broker,
        request(
            2,
            4,
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[{"name": "tx", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        ),
    )
    part = answer.topics[0].partitions[0]
    assert part.error_code is ErrorCode.none
    return int(part.offset)


async def test_list_offsets_latest_read_committed_is_the_last_stable_offset(broker_service) -> None:  # type: ignore[no-untyped-def]
    coordinator, pid, epoch = await _open_txn(broker_service)
    assert await _latest(broker_service, 0) == 1  # read_uncommitted: the high watermark
    assert await _latest(broker_service, 1) == 0  # read_committed: the open transaction's start
    await coordinator.end_txn("t1", pid, epoch, commit=False)
    await coordinator.settled("t1", None)
    assert await _latest(broker_service, 1) == 2  # data + ABORT marker
    stream = broker_service.stream_id("tx", 0)
    # What a broker that does not lead the partition reads: the durable index.
    assert coordinator.store.aborted_between([(stream, 0, 1)]) == {stream: [(pid, 0, 1)]}
    assert coordinator.store.aborted_between([(stream, 2, 5)]) == {stream: []}


class _ElsewhereLeadership:
    """Partition 0 led here, partition 1 by broker 7, whose listener refuses connections."""

    def __init__(self, node_id: int) -> None:
        self._node_id = node_id
        self._port = free_port()

    def leads(self, topic: str, partition: int) -> bool:
        return partition == 0

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return (self._node_id, 1) if partition == 0 else (7, 3)

    def brokers(self, listener: str) -> list[BrokerEndpoint]:
        return [BrokerEndpoint(7, "127.0.0.1", self._port, None)]


async def test_partitions_led_here_are_answered_locally_and_an_unreachable_leader_s_are_left_out(
    broker_service,  # type: ignore[no-untyped-def]
) -> None:
    coordinator, pid, epoch = await _open_txn(broker_service)
    streams = [broker_service.stream_id("tx", p) for p in (0, 1)]
    view = CommittedOffsets(broker_service)
    assert await view.last_stable_offsets("tx", [(0, streams[0], 1), (1, streams[1], 0)]) == {0: 0, 1: 0}
    broker_service.leadership = _ElsewhereLeadership(broker_service.node_id)
    # Partition 1's leader cannot be asked: no last stable offset, so the table leaves it alone.
    assert await view.last_stable_offsets("tx", [(0, streams[0], 1), (1, streams[1], 0)]) == {0: 0}
    await coordinator.end_txn("t1", pid, epoch, commit=False)
    await coordinator.settled("t1", None)
    # Partition 0 from memory; partition 1 (given partition 0's stream here) from the database.
    answer = await view.aborted_transactions("tx", [(0, streams[0], 0, 1), (1, streams[0], 0, 1)])
    assert answer == {0: [(pid, 0, 1)], 1: [(pid, 0, 1)]}
    assert await view.aborted_transactions("tx", [(1, streams[1], 0, 5)]) == {1: []}


async def test_a_transactional_batch_holds_the_last_stable_offset_before_it_is_acknowledged(
    broker_service,  # type: ignore[no-untyped-def]
) -> None:
    *_, produce = await _begin(broker_service)
    store = broker_service.store
    start_append = store.start_append
    pending: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    appended = asyncio.Event()

    def held_append(stream_id, payload, count):  # type: ignore[no-untyped-def]
        base, _ = start_append(stream_id, payload, count)  # in the stream: the end moved
        appended.set()
        return base, pending  # not acknowledged yet

    store.start_append = held_append
    producing = asyncio.create_task(call(broker_service, produce))
    await asyncio.wait_for(appended.wait(), 5)
    assert broker_service.high_watermark("tx", 0) == 1
    # The batch is in the stream while its append is not yet acknowledged: not committed data.
    assert await _latest(broker_service, 1) == 0
    pending.set_result(None)
    response = await producing
    assert response.responses[0].partition_responses[0].error_code is ErrorCode.none
    assert await _latest(broker_service, 1) == 0
