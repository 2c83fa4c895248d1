"""Property test of the transaction state machine: any interleaving of a producer's requests, a
zombie's, markers landing late, time passing and restarts from what was persisted never takes a
transition outside Kafka's table, answers every request once, never leaves a Prepare state without
its markers on their way, never lets memory fall behind the database, and after a restart leaves
nothing open or half ended."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.actions import (
    Action,
    Again,
    Delete,
    NeedProducerId,
    Persist,
    Respond,
    WriteMarkers,
)
from tabletopic.broker.transactions.machine import TransactionMachine
from tabletopic.broker.transactions.model import (
    PREPARING,
    PendingOffset,
    TxnMetadata,
    TxnOffsets,
    TxnPartition,
    TxnState,
)

TID = "tx-id"
TIMEOUT_MS = 10_000
PARTITIONS = {("t", p): TxnPartition("t", p, 100 + p, 0) for p in range(3)}

operation = st.one_of(
    st.tuples(st.just("init"), st.integers(0, 0)),
    st.tuples(st.just("add"), st.integers(0, 2)),
    st.tuples(st.just("offsets"), st.integers(0, 0)),
    st.tuples(st.just("commit"), st.integers(0, 0)),
    st.tuples(st.just("abort"), st.integers(0, 0)),
    st.tuples(st.just("deliver"), st.integers(0, 0)),
    st.tuples(st.just("advance"), st.integers(0, 15_000)),
    st.tuples(st.just("zombie"), st.integers(0, 0)),
    st.tuples(st.just("restart"), st.integers(0, 0)),
)


class Harness:
    """Performs the machine's actions the way the driver does, against a dict as the database; a
    marker asked for in the background waits in ``pending`` until a ``deliver`` step."""

    def __init__(self) -> None:
        self.machine = TransactionMachine()
        self.rows: dict[str, TxnMetadata] = {}
        self.pending: list[WriteMarkers] = []
        self.next_pid = 1
        self.now = 1_000
        self.producer = (-1, -1)  # what the live client holds
        self.fenced: list[tuple[int, int]] = []  # what older clients held

    def perform(self, actions: list[Action]) -> Action | None:
        for action in actions:
            if isinstance(action, Persist):
                if action.at_once:  # a delayed one may be lost to a crash: only the restart sees it
                    self.rows[action.txn.transactional_id] = action.txn.snapshot()
            elif isinstance(action, WriteMarkers):
                if action.in_background:
                    self.pending.append(action)
                else:
                    assert self.perform(self.machine.markers_written(action, self.now)) is None
            elif isinstance(action, Delete):
                self.rows.pop(action.transactional_id, None)
                self.machine.forget(action.transactional_id)
            else:
                return action
        return None

    def run(
        self, event: Callable[[int, int, int | None], list[Action]], pid: int, epoch: int
    ) -> Respond | None:
        new_pid: int | None = None
        for _ in range(4):
            outcome = self.perform(event(pid, epoch, new_pid))
            if isinstance(outcome, NeedProducerId):
                new_pid, self.next_pid = self.next_pid, self.next_pid + 1
            elif isinstance(outcome, Again):
                pid, epoch, new_pid = outcome.producer_id, outcome.producer_epoch, None
            else:
                assert outcome is None or isinstance(outcome, Respond)
                return outcome
        raise AssertionError("an event asked to be handed in again too often")

    def request(self, event: Callable[[int, int, int | None], list[Action]], pid: int, epoch: int) -> Respond:
        answer = self.run(event, pid, epoch)
        assert isinstance(answer, Respond), "every request is answered"
        return answer

    def step(self, kind: str, value: int) -> None:
        m, pid, epoch, now = self.machine, *self.producer, self.now
        if kind == "init":
            answer = self.request(
                lambda p, e, new: m.init_producer_id(TID, TIMEOUT_MS, 900_000, p, e, now, new), pid, epoch
            )
            if answer.code is ErrorCode.none:
                if self.producer != (-1, -1):
                    self.fenced.append(self.producer)
                self.producer = (answer.producer_id, answer.producer_epoch)
            elif answer.code is ErrorCode.producer_fenced:  # a restart or a timeout bumped its epoch
                self.fenced.append(self.producer)
                self.producer = (-1, -1)  # the client starts over as a new producer
            else:
                assert answer.code is ErrorCode.concurrent_transactions
        elif kind == "add":
            key = ("t", value)
            self.request(
                lambda p, e, _: m.add_partitions(TID, p, e, [key], {key: PARTITIONS[key]}, now), pid, epoch
            )
        elif kind == "offsets":
            self.request(lambda p, e, _: m.add_offsets(TID, p, e, "g", now), pid, epoch)
            offset = PendingOffset("in", 0, now, -1, None)
            self.request(
                lambda p, e, _: m.txn_offset_commit(TxnOffsets(TID, p, e, "g", (offset,))), pid, epoch
            )
        elif kind in ("commit", "abort"):
            self.request(lambda p, e, _: m.end_txn(TID, p, e, kind == "commit", now), pid, epoch)
        elif kind == "deliver" and self.pending:
            assert self.perform(m.markers_written(self.pending.pop(0), now, at_once=False)) is None
        elif kind == "advance":
            self.now += value
            if m.timed_out(self.now) == [TID]:
                assert self.run(lambda _p, _e, new: m.time_out(TID, self.now, new), -1, -1) is None
        elif kind == "zombie" and self.fenced:
            old_pid, old_epoch = self.fenced[-1]
            answer = self.request(lambda p, e, _: m.end_txn(TID, p, e, True, now), old_pid, old_epoch)
            assert answer.code in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_id_mapping)
            assert m.check_produce(TID, old_pid, old_epoch, 100) is not ErrorCode.none
        elif kind == "restart":
            self.restart()

    def restart(self) -> None:
        self.machine = TransactionMachine()
        self.machine.load(txn.snapshot() for txn in self.rows.values())
        self.pending.clear()
        assert self.run(lambda _p, _e, new: self.machine.recovered(TID, self.now, new), -1, -1) is None
        for txn in self.machine.txns.values():
            assert txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT), txn.state

    def check_invariants(self) -> None:
        for tid, txn in self.machine.txns.items():
            if txn.state in PREPARING:
                assert any(
                    (w.producer_id, w.producer_epoch) == (txn.producer_id, txn.producer_epoch)
                    for w in self.pending
                ), "a Prepare state has its markers on their way"
            if txn.state is TxnState.ONGOING:
                assert txn.partitions or txn.offsets, "a transaction begins with what it adds"
            row = self.rows.get(tid)
            if row is not None and row.producer_id == txn.producer_id:
                assert row.producer_epoch <= txn.producer_epoch, "memory is never behind the database"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, max_size=40))
def test_any_interleaving_keeps_the_transaction_consistent_and_a_restart_finishes_it(
    operations: list[tuple[str, int]],
) -> None:
    harness = Harness()
    for kind, value in operations:
        harness.step(kind, value)
        harness.check_invariants()
    harness.restart()
    harness.check_invariants()
