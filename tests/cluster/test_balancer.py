"""The auto-balancer's planner: bounded, justified moves that converge and never thrash."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tabletopic.cluster.balancer import BalancerSettings, PartitionLoad, Plan, plan_round

MB = 1_000_000.0


def loads(spec: dict[int, list[float]], out_ratio: float = 1.0) -> list[PartitionLoad]:
    """Partitions per broker, each with the given bytes in (and out = in × out_ratio)."""
    return [
        PartitionLoad(f"t{broker}", index, broker, rate, rate * out_ratio)
        for broker, rates in spec.items()
        for index, rate in enumerate(rates)
    ]


def apply(parts: list[PartitionLoad], plan: Plan) -> list[PartitionLoad]:
    moved = {(m.topic, m.partition): m.target for m in plan.moves}
    return [replace(p, leader=moved.get((p.topic, p.partition), p.leader)) for p in parts]


def within(plan: Plan, tolerance: float) -> bool:
    return all(
        abs(bytes_in - plan.mean_in) <= tolerance * plan.mean_in + 1e-6
        and abs(bytes_out - plan.mean_out) <= tolerance * plan.mean_out + 1e-6
        for bytes_in, bytes_out in plan.after.values()
    )


def test_balanced_cluster_gets_no_moves() -> None:
    plan = plan_round([1, 2, 3], loads({1: [MB, MB], 2: [MB, MB], 3: [2 * MB]}))
    assert plan.moves == ()
    assert plan.note == "within tolerance"


def test_skewed_cluster_moves_load_to_the_idle_broker_with_a_reason() -> None:
    parts = loads({1: [MB] * 6, 2: [MB] * 3, 3: []})
    plan = plan_round([1, 2, 3], parts)
    assert plan.moves
    assert all(move.source == 1 and move.target == 3 for move in plan.moves)
    assert within(plan, 0.2)
    first = plan.moves[0]
    assert "broker 1" in first.reason and "broker 3" in first.reason and "±20%" in first.reason


def test_a_round_moves_at_most_max_moves() -> None:
    parts = loads({1: [MB / 4] * 40, 2: []})
    plan = plan_round([1, 2], parts, BalancerSettings(max_moves=3))
    assert len(plan.moves) == 3


def test_recently_moved_partitions_stay_put() -> None:
    parts = loads({1: [MB, MB, MB, MB], 2: []})
    recent = {f"t1-{i}": 100.0 for i in range(4)}
    plan = plan_round([1, 2], parts, recently_moved=recent, now=110.0)
    assert plan.moves == ()
    assert "no allowed move" in plan.note
    later = plan_round([1, 2], parts, recently_moved=recent, now=200.0)
    assert later.moves


def test_idle_cluster_is_left_alone() -> None:
    plan = plan_round([1, 2], loads({1: [100.0] * 5, 2: []}))
    assert plan.moves == ()
    assert "idle" in plan.note


def test_one_huge_partition_is_not_bounced_between_brokers() -> None:
    parts = loads({1: [10 * MB], 2: [MB]})
    first = plan_round([1, 2], parts)
    assert first.moves == ()


def test_partitions_of_dead_brokers_are_ignored() -> None:
    parts = loads({1: [MB] * 4, 2: [MB] * 4, 9: [MB] * 10})
    plan = plan_round([1, 2], parts)
    assert plan.moves == ()
    assert 9 not in plan.after


def test_in_and_out_are_balanced_separately() -> None:
    # broker 1 gets the write-heavy partitions, broker 2 the read-heavy ones
    parts = [PartitionLoad("w", i, 1, MB, 0.0) for i in range(4)]
    parts += [PartitionLoad("r", i, 2, 0.0, MB) for i in range(4)]
    plan = plan_round([1, 2], parts)
    assert within(plan, 0.2)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.integers(1, 5),
        st.lists(st.floats(0.05 * MB, 0.5 * MB), max_size=25),
        min_size=2,
    ),
    st.integers(1, 6),
)
# Found by this test in a clean run: one round moved t4-0 twice (a cooldown of 0 did not stop it).
@example(spec={1: [], 2: [], 3: [50794.0, 146684.0], 4: [50000.0, 50000.0, 206493.0]}, max_moves=4)
def test_rounds_never_worsen_and_converge(spec: dict[int, list[float]], max_moves: int) -> None:
    brokers = sorted(spec)
    parts = loads(spec, out_ratio=2.0)
    knobs = BalancerSettings(max_moves=max_moves, cooldown_seconds=0.0)
    previous = None
    for round_number in range(200):
        plan = plan_round(brokers, parts, knobs, now=float(round_number))
        assert len(plan.moves) <= max_moves
        assert len({(m.topic, m.partition) for m in plan.moves}) == len(plan.moves)
        spread = sum((a - plan.mean_in) ** 2 for a, _ in plan.after.values())
        if previous is not None:
            assert spread <= previous * (1 + 1e-9) + 1e-3  # float noise at 1e11 is above 1e-3
        previous = spread
        if not plan.moves:
            break
        parts = apply(parts, plan)
    else:
        raise AssertionError("the balancer never settled")
