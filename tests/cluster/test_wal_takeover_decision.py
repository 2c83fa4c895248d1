"""The controller's shared-WAL takeover decisions as pure functions (no servers): a gone broker's
partitions wait for its WAL to be recovered, and a live broker is named to recover it."""

from __future__ import annotations

from tabletopic.cluster.controller import Assignment, WalRow, assign_recoverers, plan, unrecovered

KEYS = [("t", p) for p in range(6)]


def _placed(live: dict[int, int]) -> dict[tuple[str, int], Assignment]:
    return {key: Assignment(node, live[node], 1) for key, node in plan(KEYS, {}, live).items()}


def test_wal_of_a_live_writer_needs_no_takeover() -> None:
    wals = [WalRow(1, 4, "a"), WalRow(2, 7, "b")]
    assert unrecovered(wals, {1: 4, 2: 7}) == set()
    assert assign_recoverers(wals, {1: 4, 2: 7}, [1, 2]) == {}


def test_wal_of_an_expired_or_restarted_writer_needs_a_takeover() -> None:
    wals = [WalRow(1, 4, "a"), WalRow(2, 7, "b")]
    assert unrecovered(wals, {2: 8}) == {(1, 4), (2, 7)}  # 1 expired, 2 came back as epoch 8


def test_partitions_of_a_broker_whose_wal_is_not_recovered_stay_put() -> None:
    live = {1: 1, 2: 1, 3: 1}
    current = _placed(live)
    after = {1: 1, 2: 1}  # broker 3's lease expired
    held = unrecovered([WalRow(3, 1, "c")], after)
    moves = plan(KEYS, current, after, held=held)
    assert not any(current[k].leader == 3 for k in moves)
    # Once recovered, they move like any dead broker's partitions.
    moves = plan(KEYS, current, after, held=set())
    assert {k for k, row in current.items() if row.leader == 3} <= set(moves)


def test_held_partitions_are_not_counted_when_balancing() -> None:
    live = {1: 1, 2: 1, 3: 1}
    current = _placed(live)
    moves = plan(KEYS, current, {1: 1, 2: 1}, held={(3, 1)})
    assert moves == {}  # the live brokers are even among themselves; nothing moves onto them


def test_a_recoverer_is_named_among_eligible_brokers_and_kept_while_it_lives() -> None:
    wals = [WalRow(3, 1, "c")]
    decided = assign_recoverers(wals, {1: 1, 2: 1}, [1, 2])
    assert list(decided) == [(3, 1)] and decided[(3, 1)] in (1, 2)
    chosen = decided[(3, 1)]
    kept = [WalRow(3, 1, "c", recoverer=chosen)]
    assert assign_recoverers(kept, {1: 1, 2: 1}, [1, 2]) == {}


def test_a_recoverer_named_while_the_writer_was_gone_for_a_moment_is_dropped_when_it_is_back() -> None:
    """Named among the brokers eligible during the lapse (broker 2 was down then), it would still be
    the recoverer when the writer really dies, whoever is eligible by then."""
    back = [WalRow(3, 1, "c", recoverer=1)]
    assert assign_recoverers(back, {1: 1, 2: 1, 3: 1}, [1, 2, 3]) == {(3, 1): None}
    chosen = assign_recoverers([WalRow(3, 1, "c")], {1: 1, 2: 1}, [1, 2])[(3, 1)]
    assert chosen in (1, 2)  # the stable choice among the brokers eligible when it dies


def test_a_dead_recoverer_is_replaced() -> None:
    wals = [WalRow(3, 1, "c", recoverer=2)]
    assert assign_recoverers(wals, {1: 1}, [1]) == {(3, 1): 1}


def test_a_restarted_broker_takes_back_its_own_wal() -> None:
    wals = [WalRow(3, 1, "c", recoverer=1)]
    assert assign_recoverers(wals, {1: 1, 3: 2}, [1, 3]) == {}  # recoverer 1 lives: kept
    assert assign_recoverers([WalRow(3, 1, "c")], {1: 1, 3: 2}, [1, 3]) == {(3, 1): 3}


def test_no_recoverer_without_an_eligible_broker() -> None:
    assert assign_recoverers([WalRow(3, 1, "c")], {1: 1}, []) == {}
