"""Server-side partition assignors of KIP-848 consumer groups (``group.consumer.assignors``).

Pure functions from the members' subscriptions and the subscribed topics' partition counts to a
target assignment. Both are deterministic (same input, same output) so every coordinator that
rebuilds a group computes the same target.

* ``uniform`` (Kafka's UniformAssignor): spreads all partitions as evenly as possible over the
  members subscribed to them, keeping each partition with its current owner where that keeps the
  balance (sticky), so a member joining moves only the partitions it takes over.
* ``range`` (Kafka's RangeAssignor): per topic, contiguous ranges of partitions to the subscribed
  members in member-id order, so equally partitioned topics are co-partitioned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

TopicPartition = tuple[str, int]
Assignment = dict[str, frozenset[TopicPartition]]
Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, frozenset[TopicPartition]]], Assignment
]

# Kafka also accepts the assignors' class names; the short name is what clients send.
_CLASS_PREFIX = "org.apache.kafka.coordinator.group.assignor."
_CLASS_NAMES = {"UniformAssignor": "uniform", "RangeAssignor": "range"}


def uniform(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """Balanced, sticky assignment.

    Args:
        subscriptions: member id -> subscribed topic names (unknown topics are ignored).
        partitions: topic name -> partition count of every topic some member subscribes to.
        current: member id -> its current target assignment (for stickiness).
    """
    members = sorted(subscriptions)
    result: dict[str, set[TopicPartition]] = {m: set() for m in members}
    every = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
    subscribers = {t: [m for m in members if t in subscriptions[m]] for t in partitions}
    # The fair share of a member: its subscribed partitions spread over everyone subscribed to them
    # (exact when subscriptions are the same, a good bound otherwise).
    quota = {}
    for m in members:
        load = sum(partitions[t] / len(subscribers[t]) for t in subscriptions[m] if t in partitions)
        quota[m] = -(-int(load * 1000) // 1000)  # ceil, tolerant of float noise
    owner_of = {tp: m for m, tps in current.items() if m in result for tp in tps}
    unassigned: list[TopicPartition] = []
    for tp in every:
        owner = owner_of.get(tp)
        if owner is not None and tp[0] in subscriptions[owner] and len(result[owner]) < quota[owner]:
            result[owner].add(tp)
        else:
            unassigned.append(tp)
    for tp in unassigned:
        candidates = subscribers.get(tp[0], [])
        if candidates:
            chosen = min(candidates, key=lambda m: (len(result[m]), m))
            result[chosen].add(tp)
    _rebalance(result, subscriptions)
    return {m: frozenset(tps) for m, tps in result.items()}


def _rebalance(result: dict[str, set[TopicPartition]], subscriptions: Mapping[str, frozenset[str]]) -> None:
    """Move partitions from the most to the least loaded member while that narrows the gap by two or
    more (stickiness can leave a member above its share when quotas were rounded up)."""
    while True:
        moved = False
        for heavy in sorted(result, key=lambda m: (-len(result[m]), m)):
            for tp in sorted(result[heavy]):
                light = [
                    m for m in result if tp[0] in subscriptions[m] and len(result[m]) + 1 < len(result[heavy])
                ]
                if light:
                    target = min(light, key=lambda m: (len(result[m]), m))
                    result[heavy].discard(tp)
                    result[target].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def range_(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """Contiguous ranges per topic (``current`` is not used: range is not sticky)."""
    result: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        count = partitions[topic]
        share, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = share + (1 if index < extra else 0)
            result[member].update((topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(tps) for m, tps in result.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}


def assignor_name(name: str) -> str | None:
    """The short name of an assignor as a client or the configuration names it (``uniform``,
    ``range`` or Kafka's class names), or None if it is not one of ours."""
    short = _CLASS_NAMES.get(name.removeprefix(_CLASS_PREFIX), name)
    return short if short in ASSIGNORS else None
