"""The transaction driver against a fake marker writer (the narrow MarkerWriter Protocol): no broker,
no partition, a real metadata database. Markers a leader could not write yet are retried until they
are, the Complete state follows them, and a broker that lost the slot stops trying. A row the
database did not take leaves the transactional id as its row is, and the retry writes it."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from kio.schema.errors import ErrorCode

from tabletopic import database
from tabletopic.broker.transactions.actions import Respond, WriteMarkers
from tabletopic.broker.transactions.driver import Driver
from tabletopic.broker.transactions.machine import TransactionMachine
from tabletopic.broker.transactions.model import TxnMetadata, TxnOffsets, TxnPartition, TxnState
from tabletopic.broker.transactions.participants import GroupOffsets, TxnError
from tabletopic.broker.transactions.store import TxnStore
from tests.support.waiting import wait_until

PART = TxnPartition("tx", 0, 7, 0)


class FlakyLeaders:
    """Refuses each partition's first marker (its leader failing over), writes the next."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []

    async def write(
        self, marked: WriteMarkers, pending: Sequence[TxnPartition | str], coordinator_epoch: int
    ) -> list[TxnPartition | str]:
        failed: list[TxnPartition | str] = []
        for part in pending:
            assert isinstance(part, TxnPartition)
            key = (part.topic, part.partition)
            if key not in self.attempts:
                failed.append(part)
            self.attempts.append(key)
        return failed


class OneSlot:
    """Every transactional id in slot 0; ``held`` is what the database check says."""

    def __init__(self) -> None:
        self.held = True

    def slot(self, transactional_id: str) -> int:
        return 0

    def group_slot(self, group_id: str) -> int:
        return 0

    def holds_slot(self, conn: Any, slot: int, leader_epoch: int) -> bool:
        return self.held


async def _no_producer_id() -> int:
    raise AssertionError("no producer id is needed")


@pytest.fixture
async def driver(tmp_path: Path) -> AsyncIterator[tuple[Driver, FlakyLeaders, OneSlot]]:
    engine = database.create_engine(database.default_url(tmp_path))
    store = TxnStore(engine)
    store.migrate()
    leaders, cluster = FlakyLeaders(), OneSlot()
    driver = Driver(TransactionMachine(clustered=True), store, leaders, _no_producer_id, GroupOffsets())
    driver.slots.attach(cluster)  # type: ignore[arg-type]
    driver.slots.held[0] = 3
    driver.machine.load([TxnMetadata("t", 1, 0, TxnState.ONGOING, 60_000, 1, 1, {("tx", 0): PART})])
    yield driver, leaders, cluster
    await driver.drain()
    engine.dispose()


async def test_a_marker_refused_by_a_failing_over_leader_is_retried_then_the_transaction_completes(
    driver: tuple[Driver, FlakyLeaders, OneSlot],
) -> None:
    coordinator, leaders, _ = driver
    answer = await coordinator.perform(coordinator.machine.end_txn("t", 1, 0, True, 10))
    assert answer == Respond()
    await asyncio.wait_for(coordinator.settled("t", None), 10)
    assert leaders.attempts == [("tx", 0), ("tx", 0)]
    stored = coordinator.store.load_one("t")
    assert stored is not None and stored.state is TxnState.COMPLETE_COMMIT  # a cluster writes it at once


async def test_a_coordinator_that_lost_the_slot_stops_retrying_markers(
    driver: tuple[Driver, FlakyLeaders, OneSlot],
) -> None:
    coordinator, leaders, cluster = driver
    await coordinator.perform(coordinator.machine.end_txn("t", 1, 0, False, 10))
    await wait_until(lambda: bool(leaders.attempts), message="the first attempt at the marker")
    cluster.held = False  # nothing more may be written by this broker ...
    coordinator.slots_lost({0})  # ... and the controller told it so
    await asyncio.wait_for(coordinator.settled("t", None), 10)
    assert leaders.attempts == [("tx", 0)]  # the new coordinator finishes it
    stored = coordinator.store.load_one("t")
    assert stored is not None and stored.state is TxnState.PREPARE_ABORT


def _refuse_once(coordinator: Driver, state: TxnState) -> list[str]:
    """The next write of a row in ``state`` fails as when PostgreSQL restarts under it; returns the
    states of the rows written."""
    write, written = coordinator.store.write_row, []

    def flaky(
        conn: Any, tid: str, row: dict[str, object] | None, fence: Callable[[Any], bool] | None
    ) -> None:
        if row is not None and row["state"] == state and state not in written:
            written.append(state)
            raise sa.exc.OperationalError("UPDATE transactions", {}, Exception("terminating connection"))
        write(conn, tid, row, fence)
        written.append(str(row and row["state"]))

    coordinator.store.write_row = flaky  # type: ignore[method-assign]
    return written


async def test_a_group_added_while_the_database_was_away_is_added_again_by_the_retry(
    driver: tuple[Driver, FlakyLeaders, OneSlot],
) -> None:
    coordinator, _, _ = driver
    _refuse_once(coordinator, TxnState.ONGOING)
    add_group = functools.partial(coordinator.machine.add_offsets, "t", 1, 0, "copiers", 10)
    with pytest.raises(sa.exc.OperationalError):
        await coordinator.perform_event("t", add_group)
    txn = coordinator.machine.get("t")
    assert txn is not None and "copiers" not in txn.offsets  # as the row still is
    assert await coordinator.perform_event("t", add_group) == Respond()  # the client's retry
    stored = coordinator.store.load_one("t")
    assert stored is not None and "copiers" in stored.offsets  # what TxnOffsetCommit is checked against


async def test_a_complete_state_the_database_did_not_take_is_written_again(
    driver: tuple[Driver, FlakyLeaders, OneSlot],
) -> None:
    coordinator, _, _ = driver
    written = _refuse_once(coordinator, TxnState.COMPLETE_COMMIT)
    await coordinator.perform_event("t", functools.partial(coordinator.machine.end_txn, "t", 1, 0, True, 10))
    await asyncio.wait_for(coordinator.settled("t", None), 10)
    assert written == ["PrepareCommit", "CompleteCommit", "CompleteCommit"]
    stored = coordinator.store.load_one("t")
    assert stored is not None and stored.state is TxnState.COMPLETE_COMMIT


async def test_a_broker_that_lost_the_slot_unknowingly_answers_not_coordinator_not_a_fatal_refusal(
    driver: tuple[Driver, FlakyLeaders, OneSlot],
) -> None:
    """The old coordinator still holds the id's last transaction, Complete; the producer's next one
    is Ongoing with the new coordinator. An EndTxn that reaches the old one before it learns of the
    move must not be refused INVALID_TXN_STATE (fatal to librdkafka) from that memory."""
    coordinator, _, cluster = driver
    abort = functools.partial(coordinator.machine.end_txn, "t", 1, 0, False, 10)
    await coordinator.perform_event("t", abort)
    await asyncio.wait_for(coordinator.settled("t", None), 10)
    cluster.held = False  # the controller moved the slot; this broker has not heard yet
    commit = functools.partial(coordinator.machine.end_txn, "t", 1, 0, True, 20)
    with pytest.raises(TxnError) as refused:
        await coordinator.perform_event("t", commit)
    assert refused.value.code is ErrorCode.not_coordinator
    assert not coordinator.slots.owns("t")  # and it lets the slot go


async def test_offsets_the_row_refuses_are_refused_with_what_the_row_says(
    driver: tuple[Driver, FlakyLeaders, OneSlot],
) -> None:
    """The group's coordinator checks TxnOffsetCommit against the row, not against the memory of
    the transaction's coordinator (another broker): its refusal says what the row held."""
    coordinator, _, _ = driver
    await coordinator.perform_event(
        "t", functools.partial(coordinator.machine.add_offsets, "t", 1, 0, "copiers", 10)
    )
    keep = coordinator.store.add_pending_offsets
    refused = [
        (("t", 1, 0, "others"), "invalid_txn_state", "the transaction's row is Ongoing with groups copiers"),
        (("t", 1, 1, "copiers"), "producer_fenced", "the transaction's row has epoch 0"),
        (
            ("t", 2, 0, "copiers"),
            "invalid_producer_id_mapping",
            "the transactional id has a row with producer id 1",
        ),
        (("nobody", 1, 0, "copiers"), "invalid_producer_id_mapping", "the transactional id has no row"),
    ]
    for (tid, producer_id, epoch, group), code, why in refused:
        assert keep(TxnOffsets(tid, producer_id, epoch, group, ())) == (code, why)
    assert keep(TxnOffsets("t", 1, 0, "copiers", ())) is None
