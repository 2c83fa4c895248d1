"""The transition table of the classic group state machine, kept apart from the logic that drives it
(as h11 keeps ``_state.py`` apart from its connection).

Each state lists the states it may be entered from, as Kafka's ``GroupMetadata`` does; a transition
outside the table is a bug in :mod:`tabletopic.broker.groups.group`, never a client error.
"""

from __future__ import annotations

from tabletopic.broker.groups.model import GroupState

VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    # Everything can die (the group was deleted).
    GroupState.DEAD: frozenset(GroupState),
    # A group drains after its last member left (or expired) and the rebalance completed.
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
}


class IllegalTransition(RuntimeError):
    """The state machine tried a transition the table forbids."""


def check_transition(current: GroupState, target: GroupState) -> None:
    """Raise :class:`IllegalTransition` unless ``current -> target`` is allowed."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTransition(f"group cannot go from {current.value} to {target.value}")
