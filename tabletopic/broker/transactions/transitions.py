"""The transition table of a transactional id's state, kept apart from the logic that drives it
(as h11 keeps ``_state.py`` apart from its connection, and as :mod:`tabletopic.broker.groups.transitions`
does for groups).

Each state lists the states it may be entered from: Kafka's ``TransactionState`` table, as data. A
transition outside the table is a bug in :mod:`tabletopic.broker.transactions.machine`, never a
client error (clients get their error codes before any state changes).

Two of Kafka's states are in the table but never entered here: ``PrepareEpochFence`` (a newer
InitProducerId fences the open transaction by writing PrepareAbort with the bumped epoch in one row,
which is what Kafka's fence state leads to) and ``Dead`` (an expired transactional id's row is
deleted; the id is then unknown, which is what Kafka's Dead state answers).
"""

from __future__ import annotations

from tabletopic.broker.transactions.model import TxnState

VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    # A transaction begins with its first AddPartitionsToTxn or AddOffsetsToTxn, and goes on with
    # the next ones.
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # EndTxn(abort), a timeout, a restart, or a newer producer fencing the open transaction.
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    # Every marker of the transaction is written.
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    # An idle transactional id expires (transactional.id.expiration.ms).
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """The state machine tried a transition the table forbids."""


def check_transition(current: TxnState, target: TxnState) -> None:
    """Raise :class:`IllegalTransition` unless ``current -> target`` is allowed."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTransition(f"transaction cannot go from {current.value} to {target.value}")
