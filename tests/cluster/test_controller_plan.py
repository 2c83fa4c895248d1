"""The controller's placement rules as a pure function (no servers)."""

from __future__ import annotations

from collections import Counter

from tabletopic.cluster.controller import Assignment, group_slot, plan, predicted_leader

KEYS = [("t", p) for p in range(12)]


def _apply(current: dict, moves: dict, live: dict) -> dict:
    result = dict(current)
    for key, node in moves.items():
        old = current.get(key)
        result[key] = Assignment(node, live[node], (old.leader_epoch if old else 0) + 1)
    return result


def test_new_partitions_spread_over_live_brokers() -> None:
    live = {1: 1, 2: 1, 3: 1}
    moves = plan(KEYS, {}, live)
    assert set(moves) == set(KEYS)
    assert sorted(Counter(moves.values()).values()) == [4, 4, 4]


def test_partitions_of_a_dead_or_restarted_broker_move_and_nothing_else_does() -> None:
    live = {1: 1, 2: 1, 3: 1}
    current = _apply({}, plan(KEYS, {}, live), live)
    after_death = {1: 1, 2: 1}  # broker 3 is gone
    moves = plan(KEYS, current, after_death)
    assert set(moves) == {k for k, a in current.items() if a.leader == 3}
    assert 3 not in moves.values()
    restarted = {1: 1, 2: 1, 3: 2}  # broker 3 came back as a new incarnation
    moves = plan(KEYS, current, restarted, max_moves=0)
    assert set(moves) == {k for k, a in current.items() if a.leader == 3}


def test_draining_broker_keeps_nothing() -> None:
    live = {1: 1, 2: 1, 3: 1}
    current = _apply({}, plan(KEYS, {}, live), live)
    moves = plan(KEYS, current, live, draining=[2])
    assert {k for k, a in current.items() if a.leader == 2} <= set(moves)
    assert 2 not in moves.values()


def test_a_reassignment_target_wins_and_pinned_partitions_are_not_balanced_back() -> None:
    live = {1: 1, 2: 1, 3: 1}
    current = _apply({}, plan(KEYS, {}, live), live)
    key = next(k for k, a in current.items() if a.leader == 1)
    row = current[key]
    current[key] = Assignment(row.leader, row.leader_node_epoch, row.leader_epoch, target=2, pinned=True)
    moves = plan(KEYS, current, live)
    assert moves[key] == 2
    current = _apply(current, moves, live)
    current[key] = Assignment(2, 1, current[key].leader_epoch, pinned=True)
    assert key not in plan(KEYS, current, live)


def test_balancing_is_bounded_per_round_and_converges() -> None:
    live = {1: 1}
    current = _apply({}, plan(KEYS, {}, live), live)
    live = {1: 1, 2: 1, 3: 1}
    first = plan(KEYS, current, live, max_moves=2)
    assert len(first) == 2
    for _ in range(10):
        moves = plan(KEYS, current, live, max_moves=2)
        if not moves:
            break
        current = _apply(current, moves, live)
    assert sorted(Counter(a.leader for a in current.values()).values()) == [4, 4, 4]


def test_predicted_leader_is_stable_and_group_slots_follow_kafka() -> None:
    assert predicted_leader(("t", 5), [1, 2, 3]) == predicted_leader(("t", 5), [1, 2, 3])
    assert predicted_leader(("t", 5), []) is None
    assert group_slot("abc", 50) == 96354 % 50  # "abc".hashCode() in Java
    assert 0 <= group_slot("\u00ff" * 40, 50) < 50


def test_coordinator_slots_are_evened_out_apart_from_partitions() -> None:
    """After restarts the slots can all sit on one broker while the counts of everything together
    are even; balanced apart, every broker gets its share of them back (and the partitions, counted
    without them, even out too)."""
    slots = [("__transaction_state", s) for s in range(3)]
    live = {1: 1, 2: 1, 3: 1}
    current = {key: Assignment(1, 1, 1) for key in slots}
    current.update({key: Assignment(2 + p % 2, 1, 1) for p, key in enumerate(KEYS[:8])})
    assert plan(KEYS[:8] + slots, current, live) == {}  # 3/4/4 in all: even, as one class
    moves = plan(KEYS[:8] + slots, current, live, apart={"__transaction_state"})
    placed = {key: moves.get(key, row.leader) for key, row in current.items()}
    assert sorted(placed[key] for key in slots) == [1, 2, 3]
    spread = Counter(placed[key] for key in KEYS[:8])
    assert max(spread.values()) - min(spread[n] for n in live) <= 1  # and so are the partitions


def test_a_new_partition_is_placed_so_that_no_partition_in_use_has_to_move() -> None:
    live = {1: 1, 2: 1, 3: 1}
    # Broker 1 leads five partitions, brokers 2 and 3 four each.
    leaders = [1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    current = {("old", p): Assignment(node, 1, 1) for p, node in enumerate(leaders)}
    new = next(("new", p) for p in range(10) if predicted_leader(("new", p), [1, 2, 3]) == 1)
    wanted = [*current, new]
    moves = plan(wanted, current, live)
    # Placed on broker 1 as predicted, the counts would be 6-4-4 and a partition in use would move.
    assert moves == {new: 2}
    assert plan(wanted, _apply(current, moves, live), live) == {}


def test_a_partition_failing_over_keeps_its_predicted_broker_one_above_the_least_loaded() -> None:
    # Broker 4 died; its partition's clients ask the predicted broker, which leads one more than
    # the least loaded: sending it elsewhere would cost them a refresh.
    live = {1: 1, 2: 1, 3: 1}
    orphan = next(("orphan", p) for p in range(10) if predicted_leader(("orphan", p), [1, 2, 3]) == 1)
    leaders = [1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    current = {("old", p): Assignment(node, 1, 1) for p, node in enumerate(leaders)}
    current[orphan] = Assignment(4, 1, 7)
    assert plan([*current], current, live, max_moves=0) == {orphan: 1}
