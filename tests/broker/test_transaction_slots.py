"""Cluster-mode transaction coordinator, in process: it answers only for the slots it gained, and a
state change is written only while the database check says it still leads the slot; fenced once,
it forgets the slot (the full cluster behaviour is tests/cluster/test_transactions.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.participants import TxnError


class FakeSlots:
    """Two slots, ids hashed by their first letter; ``held`` is what the database check says."""

    def __init__(self) -> None:
        self.held = True

    def slot(self, transactional_id: str) -> int:
        return 0 if transactional_id.startswith("a") else 1

    def group_slot(self, group_id: str) -> int:
        return 0

    def holds_slot(self, conn: Any, slot: int, leader_epoch: int) -> bool:
        return self.held

    async def send_markers(self, *args: Any) -> dict[tuple[str, int], ErrorCode]:
        raise AssertionError("every partition is led here")


@pytest.fixture
async def clustered(tmp_path):  # type: ignore[no-untyped-def]
    from tabletopic import database
    from tabletopic.broker.service import BrokerService, Endpoint
    from tabletopic.config import Config
    from tabletopic.s3stream.memory import MemoryStreamStore

    engine = database.create_engine(database.default_url(tmp_path))
    service = BrokerService(Config({"data.dir": str(tmp_path)}), engine, MemoryStreamStore(), clustered=True)
    service.advertised = {"PLAINTEXT": Endpoint("PLAINTEXT", "127.0.0.1", 9092)}
    await service.start()
    yield service
    await service.stop()
    engine.dispose()


async def test_only_gained_slots_are_coordinated_and_a_fenced_write_gives_the_slot_up(clustered) -> None:  # type: ignore[no-untyped-def]
    coordinator = clustered.transactions
    slots = FakeSlots()
    coordinator.attach_cluster(slots)
    with pytest.raises(TxnError) as refused:
        await coordinator.init_producer_id("a-1", 60_000, -1, -1)
    assert refused.value.code is ErrorCode.not_coordinator  # no slot gained yet
    await coordinator.slots_gained({0: 7})
    pid, epoch = await coordinator.init_producer_id("a-1", 60_000, -1, -1)
    with pytest.raises(TxnError) as other:
        await coordinator.init_producer_id("b-1", 60_000, -1, -1)
    assert other.value.code is ErrorCode.not_coordinator  # slot 1 is another broker's
    slots.held = False  # the controller gave slot 0 to another broker meanwhile
    with pytest.raises(TxnError) as fenced:
        await coordinator.init_producer_id("a-1", 60_000, pid, epoch)
    assert fenced.value.code is ErrorCode.not_coordinator
    assert not coordinator.owns("a-1")
    assert coordinator.store.load_one("a-1").producer_epoch == epoch  # the fenced bump was not written


def _markers(topic: str, commit: bool) -> Any:
    from tests.support.kafka_requests import request

    marker = {
        "producer_id": 7,
        "producer_epoch": 0,
        "transaction_result": commit,
        "topics": [{"name": topic, "partition_indexes": [0, 5]}],
        "coordinator_epoch": 3,
    }
    return request(27, 1, markers=[marker])


async def test_write_txn_markers_is_refused_on_a_single_node(broker_service) -> None:  # type: ignore[no-untyped-def]
    from tests.support.broker_calls import call

    await broker_service.topics.create("wm", 1, {})
    answer = await call(broker_service, _markers("wm", True))
    codes = [p.error_code for p in answer.markers[0].topics[0].partitions]
    assert codes == [ErrorCode.invalid_request, ErrorCode.invalid_request]
    assert broker_service.high_watermark("wm", 0) == 0  # nothing written


async def test_write_txn_markers_writes_on_the_leader_and_refuses_a_deposed_coordinator(clustered) -> None:  # type: ignore[no-untyped-def]
    from tests.support.broker_calls import call

    await clustered.topics.create("wm", 1, {})
    answer = await call(clustered, _markers("wm", False))
    codes = [p.error_code for p in answer.markers[0].topics[0].partitions]
    assert codes == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    stream = clustered.stream_id("wm", 0)
    assert clustered.high_watermark("wm", 0) == 1  # the ABORT marker
    assert clustered.transactions.partitions.aborted_between(stream, 0, 1) == [(7, 0)]
    stale = _markers("wm", True)
    stale = dataclasses.replace(stale, markers=(dataclasses.replace(stale.markers[0], coordinator_epoch=2),))
    answer = await call(clustered, stale)
    assert answer.markers[0].topics[0].partitions[0].error_code is ErrorCode.transaction_coordinator_fenced
    assert clustered.high_watermark("wm", 0) == 1
