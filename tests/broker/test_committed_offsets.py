"""The committed end of partitions for the table coordinator: ListOffsets latest answers the last
stable offset to a READ_COMMITTED request (as Kafka does), the aborted index in the metadata
database is written before that offset moves past an aborted transaction, and
:class:`CommittedOffsets` asks nobody for partitions led here and leaves out a partition whose
leader cannot be reached; its queries to other brokers keep one connection per broker."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Generator
from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.leadership import BrokerEndpoint
from tabletopic.broker.transactions.coordinator import TransactionCoordinator
from tabletopic.broker.transactions.stable import CommittedOffsets
from tabletopic.records.encoder import Record, build_batch
from tests.support.broker_calls import call
from tests.support.kafka_clients import create_topic
from tests.support.kafka_requests import produce_request, request
from tests.support.ports import free_port
from tests.support.waiting import wait_until


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

    def held_append(stream_id, payload, count, crc=None):  # type: ignore[no-untyped-def]
        base, _ = start_append(stream_id, payload, count, crc)  # in the stream: the end moved
        appended.set()
        return base, _Held(pending)  # not acknowledged yet

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


class _Held:
    """A store acknowledgement (``PendingAppend``) that waits on a future the test resolves."""

    def __init__(self, future: asyncio.Future[None]) -> None:
        self._future = future

    def __await__(self) -> Generator[Any, None, None]:
        return self._future.__await__()

    def failed(self) -> bool:
        return self._future.done() and self._future.exception() is not None


class _CountingRelay:
    """A TCP relay to a real broker that counts the connections it accepts and can drop them all,
    as a restarting broker (or one closing idle connections) does."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self.accepted = 0
        self.open = 0
        self._clients: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        self._clients.append(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)
        finally:
            self.open -= 1

    def drop(self) -> None:
        for writer in self._clients:
            writer.close()
        self._clients = []

    async def stop(self) -> None:
        self.drop()
        self._server.close()
        await self._server.wait_closed()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


class _RemoteLeadership:
    """Every partition led by broker 7, reached through ``port``."""

    def __init__(self, port: int) -> None:
        self._port = port

    def leads(self, topic: str, partition: int) -> bool:
        return False

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return 7, -1

    def brokers(self, listener: str) -> list[BrokerEndpoint]:
        return [BrokerEndpoint(7, "127.0.0.1", self._port, None)]


async def test_last_stable_offset_queries_reuse_one_connection_per_broker_and_reconnect_after_a_drop(
    broker_service,  # type: ignore[no-untyped-def]
    bootstrap: str,
) -> None:
    topic = f"pooled-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(create_topic, bootstrap, topic, 2)
    relay = _CountingRelay(bootstrap)  # broker 7: the session's real broker, behind a counter
    broker_service.leadership = _RemoteLeadership(await relay.start())
    view = CommittedOffsets(broker_service)
    wanted = [(0, 0, 0), (1, 0, 0)]
    try:
        for _ in range(4):  # the table coordinator's cycles
            assert await view.last_stable_offsets(topic, wanted) == {0: 0, 1: 0}
        assert relay.accepted == 1
        relay.drop()  # the peer closed it: the next cycle replaces it, no partition left out
        assert await view.last_stable_offsets(topic, wanted) == {0: 0, 1: 0}
        assert await view.last_stable_offsets(topic, wanted) == {0: 0, 1: 0}
        assert relay.accepted == 2
        broker_service.inter_broker_client.close()  # the broker stops: nothing is left open
        await wait_until(lambda: relay.open == 0, timeout=5, message="every relay connection closed")
    finally:
        await relay.stop()
