"""The sans-IO transaction state machine: every crash-recovery and fencing case as a plain unit test
of events in and actions out, with no event loop, database or partition."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.handlers.common import txn_error
from tabletopic.broker.transactions.actions import (
    Again,
    Delete,
    NeedProducerId,
    Persist,
    Respond,
    WriteMarkers,
)
from tabletopic.broker.transactions.machine import TransactionMachine
from tabletopic.broker.transactions.model import (
    MAX_EPOCH,
    PendingOffset,
    TxnMetadata,
    TxnOffsets,
    TxnPartition,
    TxnState,
)
from tabletopic.broker.transactions.transitions import (
    VALID_PREVIOUS_STATES,
    IllegalTransition,
    check_transition,
)

TID = "t1"
PID = 1000
MAX_TIMEOUT = 900_000
PART = TxnPartition("tx", 0, 11, 5)


def _ongoing(machine: TransactionMachine, epoch: int = 0, started_ms: int = 100) -> TxnMetadata:
    txn = TxnMetadata(TID, PID, epoch, TxnState.ONGOING, 60_000, started_ms, started_ms, {("tx", 0): PART})
    machine.load([txn])
    return txn


def _init(machine: TransactionMachine, pid: int = -1, epoch: int = -1, new_pid: int | None = None) -> list:  # type: ignore[type-arg]
    return machine.init_producer_id(TID, 60_000, MAX_TIMEOUT, pid, epoch, 1_000, new_pid)


def _respond(actions: list) -> Respond:  # type: ignore[type-arg]
    last = actions[-1]
    assert isinstance(last, Respond)
    return last


def test_init_producer_id_of_a_new_id_asks_for_a_producer_id_then_persists_empty_at_epoch_zero() -> None:
    machine = TransactionMachine()
    assert _init(machine) == [NeedProducerId()]
    assert machine.get(TID) is None  # nothing changed before the id came
    persist, respond = _init(machine, new_pid=PID)
    assert isinstance(persist, Persist) and persist.txn.state is TxnState.EMPTY
    assert respond == Respond(producer_id=PID, producer_epoch=0)


def test_init_producer_id_outside_the_maximum_timeout_is_refused() -> None:
    actions = TransactionMachine().init_producer_id(TID, MAX_TIMEOUT + 1, MAX_TIMEOUT, -1, -1, 0)
    assert actions == [Respond(ErrorCode.invalid_transaction_timeout)]


def test_new_producer_fences_an_ongoing_transaction_by_aborting_it_with_a_bumped_epoch() -> None:
    machine = TransactionMachine()
    _ongoing(machine, epoch=3)
    persist, markers, again = _init(machine)
    assert isinstance(persist, Persist) and persist.txn.state is TxnState.PREPARE_ABORT
    assert markers == WriteMarkers(TID, PID, 4, False, (PART,), (), in_background=False)
    assert again == Again()
    assert machine.markers_written(markers, 2_000) == [Persist(machine.txns[TID].snapshot(), at_once=True)]
    assert machine.txns[TID].state is TxnState.COMPLETE_ABORT
    persist, respond = _init(machine, again.producer_id, again.producer_epoch)
    assert respond == Respond(
        producer_id=PID, producer_epoch=5
    )  # one bump to abort, one for the new producer
    assert machine.check(TID, PID, 3) == Respond(ErrorCode.producer_fenced)


def test_fenced_producer_gets_producer_fenced_or_invalid_producer_epoch_by_api_version() -> None:
    machine = TransactionMachine()
    _ongoing(machine, epoch=3)
    refusal = machine.end_txn(TID, PID, 2, True, 1_000)
    assert refusal == [Respond(ErrorCode.producer_fenced)]
    code = _respond(refusal).code
    assert txn_error(code, 26, 1) is ErrorCode.invalid_producer_epoch  # EndTxn v1 predates KIP-588
    assert txn_error(code, 26, 2) is ErrorCode.producer_fenced
    assert txn_error(code, 28, 3) is ErrorCode.invalid_producer_epoch  # TxnOffsetCommit never had it
    assert machine.check_produce(TID, PID, 2, PART.stream_id) is ErrorCode.invalid_producer_epoch


def test_kip_360_bump_of_a_producer_that_is_not_current_is_fenced() -> None:
    machine = TransactionMachine()
    _ongoing(machine, epoch=3)
    assert _init(machine, PID, 2) == [Respond(ErrorCode.producer_fenced)]


def test_end_txn_persists_prepare_then_answers_and_writes_markers_in_the_background() -> None:
    machine = TransactionMachine()
    _ongoing(machine)
    persist, markers, respond = machine.end_txn(TID, PID, 0, True, 1_000)
    assert isinstance(persist, Persist) and persist.txn.state is TxnState.PREPARE_COMMIT
    assert isinstance(markers, WriteMarkers) and markers.in_background and markers.commit
    assert respond == Respond()
    # The producer's next call meanwhile is told to retry; Produce is refused.
    assert machine.add_partitions(TID, PID, 0, [("tx", 0)], {}, 1_001) == [
        Respond(ErrorCode.concurrent_transactions)
    ]
    assert _init(machine, PID, 0) == [Respond(ErrorCode.concurrent_transactions)]
    assert machine.check_produce(TID, PID, 0, PART.stream_id) is ErrorCode.invalid_txn_state
    (complete,) = machine.markers_written(markers, 1_500, at_once=False)
    assert complete == Persist(machine.txns[TID].snapshot(), at_once=False)  # a single node may wait
    assert isinstance(complete, Persist)
    assert complete.txn.state is TxnState.COMPLETE_COMMIT and not complete.txn.partitions


def test_end_txn_retried_after_completion_is_answered_as_it_was() -> None:
    machine = TransactionMachine()
    _ongoing(machine)
    markers = machine.end_txn(TID, PID, 0, False, 1_000)[1]
    assert isinstance(markers, WriteMarkers)
    machine.markers_written(markers, 1_100)
    assert machine.end_txn(TID, PID, 0, False, 1_200) == [Respond()]
    assert machine.end_txn(TID, PID, 0, True, 1_200) == [Respond(ErrorCode.invalid_txn_state)]


def test_markers_written_for_a_transaction_that_moved_on_changes_nothing() -> None:
    machine = TransactionMachine()
    _ongoing(machine)
    markers = machine.end_txn(TID, PID, 0, True, 1_000)[1]
    assert isinstance(markers, WriteMarkers)
    assert machine.markers_written(markers, 1_100) != []
    assert machine.markers_written(markers, 1_200) == []  # a second delivery after completion


def test_restart_in_prepare_commit_writes_the_markers_again_then_completes_durably() -> None:
    machine = TransactionMachine()
    offsets = {("in", 0): PendingOffset("in", 0, 42, -1, None)}
    txn = TxnMetadata(TID, PID, 2, TxnState.PREPARE_COMMIT, 60_000, 1, 1, {("tx", 0): PART}, {"g": offsets})
    machine.load([txn])
    (markers,) = machine.recovered(TID, 5_000)
    assert markers == WriteMarkers(TID, PID, 2, True, (PART,), ("g",), False, {"g": offsets})
    (complete,) = machine.markers_written(markers, 5_100, at_once=False)
    assert isinstance(complete, Persist)
    assert complete.txn.state is TxnState.COMPLETE_COMMIT
    assert complete.at_once  # group offsets were committed: never finished twice


def test_restart_with_an_ongoing_transaction_aborts_it_and_fences_its_producer() -> None:
    machine = TransactionMachine()
    _ongoing(machine, epoch=7)
    persist, markers = machine.recovered(TID, 5_000)
    assert isinstance(persist, Persist) and persist.txn.state is TxnState.PREPARE_ABORT
    assert markers == WriteMarkers(TID, PID, 8, False, (PART,), (), in_background=False)


def test_cluster_takeover_finishes_prepare_in_the_background_and_keeps_ongoing() -> None:
    machine = TransactionMachine(clustered=True)
    _ongoing(machine)
    assert machine.taken_over(TID) == []
    machine.txns[TID].state = TxnState.PREPARE_ABORT
    (markers,) = machine.taken_over(TID)
    assert isinstance(markers, WriteMarkers) and markers.in_background
    assert machine.markers_written(markers, 9, at_once=False)[0] == Persist(machine.txns[TID].snapshot())


def test_timeout_of_an_ongoing_transaction_aborts_it_with_a_bumped_epoch() -> None:
    machine = TransactionMachine()
    _ongoing(machine, epoch=1, started_ms=100)
    assert machine.timed_out(100 + 60_000) == []
    assert machine.time_out(TID, 100 + 60_000) == []
    assert machine.timed_out(100 + 60_001) == [TID]
    persist, markers = machine.time_out(TID, 100 + 60_001)
    assert isinstance(persist, Persist) and (persist.txn.state, persist.txn.producer_epoch) == (
        TxnState.PREPARE_ABORT,
        2,
    )
    assert isinstance(markers, WriteMarkers) and not markers.commit


def test_an_exhausted_epoch_takes_a_new_producer_id_at_epoch_zero() -> None:
    machine = TransactionMachine()
    _ongoing(machine, epoch=MAX_EPOCH - 1)
    assert machine.time_out(TID, 10**9) == [NeedProducerId()]
    persist, _markers = machine.time_out(TID, 10**9, new_producer_id=2000)
    assert isinstance(persist, Persist) and (persist.txn.producer_id, persist.txn.producer_epoch) == (2000, 0)


def test_add_partitions_is_all_or_nothing() -> None:
    machine = TransactionMachine()
    machine.load([TxnMetadata(TID, PID, 0, TxnState.COMPLETE_COMMIT, 60_000)])
    wanted = [("tx", 0), ("gone", 0)]
    refused = machine.add_partitions(TID, PID, 0, wanted, {("tx", 0): PART, ("gone", 0): None}, 1_000)
    assert _respond(refused).partitions == (
        (("tx", 0), ErrorCode.operation_not_attempted),
        (("gone", 0), ErrorCode.unknown_topic_or_partition),
    )
    assert machine.txns[TID].state is TxnState.COMPLETE_COMMIT  # nothing began
    persist, respond = machine.add_partitions(TID, PID, 0, [("tx", 0)], {("tx", 0): PART}, 1_000)
    assert isinstance(persist, Persist) and persist.txn.state is TxnState.ONGOING
    assert isinstance(respond, Respond)
    assert respond.partitions == ((("tx", 0), ErrorCode.none),)
    assert machine.check_produce(TID, PID, 0, PART.stream_id) is ErrorCode.none
    assert machine.to_join(TID, [("tx", 0), ("tx", 1)]) == [("tx", 1)]
    # Added again: answered, nothing written.
    assert machine.add_partitions(TID, PID, 0, [("tx", 0)], {}, 1_001) == [
        Respond(partitions=respond.partitions)
    ]


def test_offsets_need_their_group_added_first_and_are_committed_with_the_markers() -> None:
    machine = TransactionMachine()
    _ongoing(machine)
    offset = PendingOffset("in", 0, 7, -1, "m")
    commit = TxnOffsets(TID, PID, 0, "g", (offset,))
    assert machine.txn_offset_commit(commit) == [Respond(ErrorCode.invalid_txn_state)]
    assert isinstance(machine.add_offsets(TID, PID, 0, "g", 1_000)[0], Persist)
    assert machine.add_offsets(TID, PID, 0, "g", 1_000) == [Respond()]
    assert isinstance(machine.txn_offset_commit(commit)[0], Persist)
    markers = machine.end_txn(TID, PID, 0, True, 1_000)[1]
    assert isinstance(markers, WriteMarkers) and markers.offsets == {"g": {("in", 0): offset}}


def test_idle_ids_expire_but_open_transactions_do_not() -> None:
    machine = TransactionMachine()
    _ongoing(machine, started_ms=0)
    assert machine.idle(10**12, 1) == []
    machine.txns[TID].state = TxnState.COMPLETE_ABORT
    assert machine.idle(10**12, 1) == [TID]
    assert machine.expire(TID, 10**12, 1) == [Delete(TID)]


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (TxnState.EMPTY, TxnState.PREPARE_COMMIT),
        (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_ABORT),
        (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_ABORT),
        (TxnState.ONGOING, TxnState.DEAD),
    ],
)
def test_transitions_outside_kafkas_table_are_illegal(current: TxnState, target: TxnState) -> None:
    with pytest.raises(IllegalTransition):
        check_transition(current, target)


def test_the_table_lists_every_state() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(TxnState)
