"""Server-side partition assignors of KIP-848 consumer groups (``group.consumer.assignors``).

Pure functions from the members' subscriptions and the subscribed topics' partition counts to a
target assignment. Both are deterministic (same input, same output) so every coordinator that
rebuilds a group computes the same target.

* ``uniform`` (Kafka's UniformAssignor): spreads all partitions as evenly as possible over the
  members subscribed to them, keeping each partition with its current owner where that keeps the
  balance (sticky), so a member joining moves only the partitions it takes over.
* ``range`` (Kafka's RangeAssignor): per topic, contiguous ranges of partitions to the subscribed
  members in member-id order, so equally partitioned topics are co-partitioned.

Both are rack-aware as Kafka 4's are: where members name a rack (``client.rack``) and partitions
have one (their leader's ``broker.rack``), a partition goes to a member of its rack whenever that
keeps the balance. A consumer then reads from the leader in its own zone, which serves from memory,
rather than from another broker of its zone, which serves what the leader has uploaded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]
Assignment = dict[str, frozenset[TopicPartition]]


@dataclass(frozen=True, slots=True)
class Racks:
    """The racks of members (member id -> rack) and of partitions (their leader's rack)."""

    members: Mapping[str, str] = field(default_factory=dict)
    partitions: Mapping[TopicPartition, str] = field(default_factory=dict)

    def same(self, member: str, tp: TopicPartition) -> bool:
        """Whether ``member`` is in ``tp``'s rack (False where either has none)."""
        rack = self.members.get(member)
        return rack is not None and rack == self.partitions.get(tp)


NO_RACKS = Racks()

Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, frozenset[TopicPartition]], Racks],
    Assignment,
]

# Kafka also accepts the assignors' class names; the short name is what clients send.
_CLASS_PREFIX = "org.apache.kafka.coordinator.group.assignor."
_CLASS_NAMES = {"UniformAssignor": "uniform", "RangeAssignor": "range"}


def uniform(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, frozenset[TopicPartition]],
    racks: Racks = NO_RACKS,
) -> Assignment:
    """Balanced, sticky assignment, rack-aware where balance allows.

    Args:
        subscriptions: member id -> subscribed topic names (unknown topics are ignored).
        partitions: topic name -> partition count of every topic some member subscribes to.
        current: member id -> its current target assignment (for stickiness).
        racks: members' and partitions' racks. A partition stays with its owner unless the owner
            is in another rack than the partition and a subscribed member is in the same one.
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

    # The racks of each topic's subscribers: whether a member of a partition's rack could take it
    # is then one lookup (this runs for every partition of every subscribed topic).
    subscriber_racks = {
        t: {rack for m in ms if (rack := racks.members.get(m)) is not None} for t, ms in subscribers.items()
    }

    def rack_served(tp: TopicPartition) -> bool:
        rack = racks.partitions.get(tp)
        return rack is not None and rack in subscriber_racks.get(tp[0], ())

    unassigned: list[TopicPartition] = []
    for tp in every:
        owner = owner_of.get(tp)
        if (
            owner is not None
            and tp[0] in subscriptions[owner]
            and len(result[owner]) < quota[owner]
            and (racks.same(owner, tp) or not rack_served(tp))
        ):
            result[owner].add(tp)
        else:
            unassigned.append(tp)
    # First every partition a member of its rack can take while below its share goes to such a
    # member; only then the rest, to whoever has the fewest. Taken in one pass, a partition whose
    # own rack's members were full could fill a member's share with another rack's partition and
    # leave that partition to a member of a third rack.
    leftover: list[TopicPartition] = []
    for tp in unassigned:
        local = [m for m in subscribers.get(tp[0], []) if racks.same(m, tp) and len(result[m]) < quota[m]]
        if local:
            result[min(local, key=lambda m: (len(result[m]), m))].add(tp)
        else:
            leftover.append(tp)
    for tp in leftover:
        candidates = subscribers.get(tp[0], [])
        if candidates:
            chosen = min(candidates, key=lambda m: (len(result[m]) >= quota[m], len(result[m]), m))
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
    racks: Racks = NO_RACKS,
) -> Assignment:
    """Per topic, each member gets its share in partition order (``current`` is not used: range is
    not sticky). Without racks the shares are contiguous ranges; with racks a member first takes
    the partitions of its rack, up to its share, as Kafka's rack-aware RangeAssignor does."""
    result: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        share, extra = divmod(partitions[topic], len(members))
        room = {m: share + (1 if index < extra else 0) for index, m in enumerate(members)}
        in_rack: dict[str, list[str]] = {}  # rack -> its members, in member order
        for m in members:
            if (rack := racks.members.get(m)) is not None:
                in_rack.setdefault(rack, []).append(m)
        left: list[TopicPartition] = []
        for tp in ((topic, p) for p in range(partitions[topic])):
            rack = racks.partitions.get(tp)
            same_rack = next((m for m in in_rack.get(rack, ()) if room[m]), None) if rack else None
            if same_rack is None:
                left.append(tp)
            else:
                result[same_rack].add(tp)
                room[same_rack] -= 1
        for member in members:
            taken, left = left[: room[member]], left[room[member] :]
            result[member].update(taken)
    return {m: frozenset(tps) for m, tps in result.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}


def assignor_name(name: str) -> str | None:
    """The short name of an assignor as a client or the configuration names it (``uniform``,
    ``range`` or Kafka's class names), or None if it is not one of ours."""
    short = _CLASS_NAMES.get(name.removeprefix(_CLASS_PREFIX), name)
    return short if short in ASSIGNORS else None
