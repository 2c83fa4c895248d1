"""Cluster-mode transaction coordinator, in process: it answers only for the slots it gained, and a
state change is written only while the database check says it still leads the slot; fenced once,
it forgets the slot (the full cluster behaviour is tests/cluster/test_transactions.py)."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions import TxnError


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
