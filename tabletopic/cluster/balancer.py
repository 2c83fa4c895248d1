"""The auto-balancer's planner: which partition leaders to move so network load evens out.

Brokers on shared object storage hold no data, so moving a partition's leadership costs about a
second and copies nothing; balancing is then a matter of choosing moves well. This module is pure
(no database, no clock of its own): the controller feeds it the load each broker reported with its
lease and gets back a bounded plan with the reason for every move, which `tabletopic cluster
balance --dry-run` prints as it is.

The goal, per broker, is network bytes in and out each within ``tolerance`` (±20 % by default) of
the mean over live brokers. Three rules keep it from thrashing:

- a round moves at most ``max_moves`` partitions;
- a move is taken only if it lowers the imbalance score by a real margin and does not push the
  destination above the band it is meant to restore;
- a partition moved less than ``cooldown_seconds`` ago is not moved again, and the whole planner
  stays quiet while the cluster carries less than ``min_bytes_per_second`` per broker (noise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PartitionLoad:
    """What one partition costs its leader, in bytes per second over the last report window."""

    topic: str
    partition: int
    leader: int
    bytes_in: float
    bytes_out: float

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class BalancerSettings:
    """The knobs of one planning round (``auto.balancer.*`` keys)."""

    tolerance: float = 0.20
    max_moves: int = 8
    cooldown_seconds: float = 60.0
    min_bytes_per_second: float = 64 * 1024
    min_improvement: float = 0.01


@dataclass(frozen=True, slots=True)
class Move:
    """One leadership move and the sentence that justifies it."""

    topic: str
    partition: int
    source: int
    target: int
    reason: str


@dataclass(slots=True)
class BrokerLoad:
    """Running totals of one broker while a plan is built."""

    broker: int
    bytes_in: float = 0.0
    bytes_out: float = 0.0
    partitions: list[PartitionLoad] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Plan:
    """The moves of one round, and the load before and after them, for printing."""

    moves: tuple[Move, ...]
    before: Mapping[int, tuple[float, float]]
    after: Mapping[int, tuple[float, float]]
    mean_in: float
    mean_out: float
    note: str = ""

    @property
    def balanced(self) -> bool:
        return not self.moves


def _score(loads: Mapping[int, BrokerLoad], mean_in: float, mean_out: float) -> float:
    """Sum of squared relative deviations from the mean, in and out: 0 when perfectly even."""
    total = 0.0
    for load in loads.values():
        if mean_in > 0:
            total += ((load.bytes_in - mean_in) / mean_in) ** 2
        if mean_out > 0:
            total += ((load.bytes_out - mean_out) / mean_out) ** 2
    return total


def _score_after(
    loads: Mapping[int, BrokerLoad],
    mean_in: float,
    mean_out: float,
    part: PartitionLoad,
    source: BrokerLoad,
    target: BrokerLoad,
) -> float:
    """The score if ``part`` moved from ``source`` to ``target``, without moving it."""
    total = 0.0
    for load in loads.values():
        shift = -1 if load is source else 1 if load is target else 0
        bytes_in = load.bytes_in + shift * part.bytes_in
        bytes_out = load.bytes_out + shift * part.bytes_out
        if mean_in > 0:
            total += ((bytes_in - mean_in) / mean_in) ** 2
        if mean_out > 0:
            total += ((bytes_out - mean_out) / mean_out) ** 2
    return total


def _deviation(value: float, mean: float) -> float:
    return (value - mean) / mean if mean > 0 else 0.0


def _outside_band(load: BrokerLoad, mean_in: float, mean_out: float, tolerance: float) -> bool:
    return (
        abs(_deviation(load.bytes_in, mean_in)) > tolerance
        or abs(_deviation(load.bytes_out, mean_out)) > tolerance
    )


def _overfills(current: float, added: float, ceiling: float) -> bool:
    """True when adding a non-zero load would lift a broker above the band's ceiling."""
    return added > 0 and current + added > ceiling


def _rate(value: float) -> str:
    for unit, size in (("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B/s"


def _describe(load: BrokerLoad, mean_in: float, mean_out: float) -> str:
    return (
        f"broker {load.broker} in {_rate(load.bytes_in)} ({_deviation(load.bytes_in, mean_in):+.0%}), "
        f"out {_rate(load.bytes_out)} ({_deviation(load.bytes_out, mean_out):+.0%})"
    )


def plan_round(
    brokers: Iterable[int],
    partitions: Iterable[PartitionLoad],
    settings: BalancerSettings = BalancerSettings(),
    *,
    recently_moved: Mapping[str, float] | None = None,
    now: float = 0.0,
) -> Plan:
    """Plan one round of leadership moves.

    Args:
        brokers: the live brokers that may lead partitions (a broker with no partition counts).
        partitions: every partition with its current leader and load; partitions led by a broker
            not in ``brokers`` are ignored (failover, not balancing, handles them).
        settings: tolerance, move budget and anti-thrash knobs.
        recently_moved: partition name (``topic-partition``) to the time it last moved.
        now: the time ``recently_moved`` is measured against.

    Returns:
        A plan whose moves, applied in order, bring every broker closer to the band; empty when
        the cluster is already within it, too idle to matter, or no move helps.
    """
    loads = {broker: BrokerLoad(broker) for broker in sorted(set(brokers))}
    for part in partitions:
        load = loads.get(part.leader)
        if load is None:
            continue
        load.bytes_in += part.bytes_in
        load.bytes_out += part.bytes_out
        load.partitions.append(part)
    before = {b: (load.bytes_in, load.bytes_out) for b, load in loads.items()}
    if len(loads) < 2:
        return Plan((), before, before, 0.0, 0.0, "fewer than two live brokers")
    mean_in = sum(load.bytes_in for load in loads.values()) / len(loads)
    mean_out = sum(load.bytes_out for load in loads.values()) / len(loads)
    if max(mean_in, mean_out) < settings.min_bytes_per_second:
        note = f"cluster idle (mean {_rate(max(mean_in, mean_out))} per broker)"
        return Plan((), before, before, mean_in, mean_out, note)
    recent = recently_moved or {}
    moves: list[Move] = []
    moved: set[str] = set()  # a round moves a partition once, whatever the cooldown (it may be 0)
    score = _score(loads, mean_in, mean_out)
    while len(moves) < settings.max_moves:
        best = _best_move(loads, mean_in, mean_out, settings, recent, now, score, moved)
        if best is None:
            break
        part, source, target, new_score = best
        reason = (
            f"{_describe(source, mean_in, mean_out)} is outside ±{settings.tolerance:.0%} of the mean; "
            f"moving {part.name} (in {_rate(part.bytes_in)}, out {_rate(part.bytes_out)}) to "
            f"{_describe(target, mean_in, mean_out)}"
        )
        moves.append(Move(part.topic, part.partition, source.broker, target.broker, reason))
        _apply(part, source, target)
        moved.add(part.name)
        recent = {**recent, part.name: now}
        score = new_score
    after = {b: (load.bytes_in, load.bytes_out) for b, load in loads.items()}
    if moves:
        note = ""
    elif any(_outside_band(load, mean_in, mean_out, settings.tolerance) for load in loads.values()):
        note = "outside tolerance, but no allowed move improves the balance"
    else:
        note = "within tolerance"
    return Plan(tuple(moves), before, after, mean_in, mean_out, note)


def _apply(part: PartitionLoad, source: BrokerLoad, target: BrokerLoad) -> None:
    source.partitions.remove(part)
    source.bytes_in -= part.bytes_in
    source.bytes_out -= part.bytes_out
    target.partitions.append(part)
    target.bytes_in += part.bytes_in
    target.bytes_out += part.bytes_out


def _best_move(
    loads: dict[int, BrokerLoad],
    mean_in: float,
    mean_out: float,
    settings: BalancerSettings,
    recent: Mapping[str, float],
    now: float,
    score: float,
    moved: set[str],
) -> tuple[PartitionLoad, BrokerLoad, BrokerLoad, float] | None:
    """The single move that lowers the score most, from a broker outside the band."""
    best: tuple[PartitionLoad, BrokerLoad, BrokerLoad, float] | None = None
    upper = 1 + settings.tolerance
    for source in loads.values():
        if not _outside_band(source, mean_in, mean_out, settings.tolerance):
            continue
        for part in list(source.partitions):
            moved_at = recent.get(part.name)
            if part.name in moved or (moved_at is not None and now - moved_at < settings.cooldown_seconds):
                continue
            for target in loads.values():
                if target is source:
                    continue
                if _overfills(target.bytes_in, part.bytes_in, upper * mean_in) or _overfills(
                    target.bytes_out, part.bytes_out, upper * mean_out
                ):
                    continue
                new_score = _score_after(loads, mean_in, mean_out, part, source, target)
                if new_score < score - settings.min_improvement and (best is None or new_score < best[3]):
                    best = (part, source, target, new_score)
    return best
