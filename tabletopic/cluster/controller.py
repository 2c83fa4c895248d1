"""The controller's decisions as pure functions: who should lead each partition, given the live
brokers and the current assignment. The database side (:mod:`tabletopic.cluster.db`) applies them
in one transaction conditional on the controller epoch.

Rules, in order: a reassignment asked for (``target``) wins when its broker is alive; a partition
whose leader is dead, draining, or a former incarnation (older node epoch) goes to its predicted
broker when that one is alive, not draining and leads at most one partition more than the least
loaded one, else to the least loaded one; a new partition goes there only when it leads no more (so
a new topic never makes a partition in use move); then, at most
``max_moves`` partitions move from the most to the least loaded broker while their counts differ
by more than one (pinned partitions, placed by an operator, stay). Coordinator slots are evened
out per kind, apart from partitions, so every broker coordinates its share of groups and
transactions.

Shared WALs (``s3stream.wal.mode=shared``): a broker incarnation that is gone may hold acknowledged
appends only its WAL has. Its partitions stay where they are (unavailable) until its WAL is taken
over; :func:`assign_recoverers` names the live broker that does it.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tabletopic.ids import BrokerEpoch, LeaderEpoch, NodeId

PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Assignment:
    """One row of ``cluster_partitions``."""

    leader: NodeId | None
    leader_node_epoch: BrokerEpoch
    leader_epoch: LeaderEpoch
    target: NodeId | None = None
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class WalRow:
    """A shared WAL not yet recovered: broker ``node_id``'s incarnation ``node_epoch`` writes (or
    wrote) it in the directory ``wal`` (its path, as every broker mounts it); ``recoverer`` is the
    broker told to take it over."""

    node_id: NodeId
    node_epoch: BrokerEpoch
    wal: str
    recoverer: NodeId | None = None


def unrecovered(
    wals: Iterable[WalRow], live: Mapping[NodeId, BrokerEpoch]
) -> set[tuple[NodeId, BrokerEpoch]]:
    """``(node_id, node_epoch)`` of the shared WALs whose writer is gone (its lease expired, or a
    newer incarnation registered): their partitions wait for the takeover."""
    return {(w.node_id, w.node_epoch) for w in wals if live.get(w.node_id) != w.node_epoch}


def assign_recoverers(
    wals: Iterable[WalRow], live: Mapping[NodeId, BrokerEpoch], eligible: Sequence[NodeId]
) -> dict[tuple[NodeId, BrokerEpoch], NodeId | None]:
    """Recoverers to (re)assign: ``{(node_id, node_epoch): broker}`` for each WAL whose writer is
    gone and whose recoverer is none, dead or no longer eligible. The broker itself, back as a new
    incarnation, takes its own WAL back (it already did at start, so the takeover is quick);
    otherwise a stable choice among the eligible brokers spreads the takeovers.

    A WAL whose writer is live again (its lease lapsed for a moment, and it renewed before the
    recoverer fenced the WAL) loses its recoverer (``None``): that decision was made among the
    brokers eligible then, and the writer's real end is decided afresh among those eligible at
    that time."""
    gone = unrecovered(wals, live)
    candidates = sorted(eligible)
    decided: dict[tuple[NodeId, BrokerEpoch], NodeId | None] = {}
    for row in wals:
        key = (row.node_id, row.node_epoch)
        if key not in gone:
            if row.recoverer is not None:
                decided[key] = None
            continue
        if not candidates or (row.recoverer is not None and row.recoverer in candidates):
            continue
        if row.node_id in candidates:
            decided[key] = row.node_id
        else:
            decided[key] = candidates[
                zlib.crc32(f"{row.node_id}/{row.node_epoch}".encode()) % len(candidates)
            ]
    return decided


def predicted_leader(key: PartitionKey, candidates: Sequence[NodeId]) -> NodeId | None:
    """A stable choice among ``candidates`` (sorted node ids), the same on every broker: what
    Metadata reports for a partition the controller has not placed yet, and where the controller
    then places it."""
    if not candidates:
        return None
    topic, partition = key
    return candidates[(zlib.crc32(topic.encode()) + partition) % len(candidates)]


def guessed_leader(key: PartitionKey, row: Assignment | None, eligible: Sequence[NodeId]) -> NodeId | None:
    """The broker Metadata names for a partition without a live leader: the move's target while
    it may lead, else :func:`predicted_leader` among ``eligible`` (sorted)."""
    if row is not None and row.target is not None and row.target in eligible:
        return row.target
    return predicted_leader(key, eligible)


def plan(
    wanted: Iterable[PartitionKey],
    current: Mapping[PartitionKey, Assignment],
    live: Mapping[NodeId, BrokerEpoch],
    draining: Iterable[NodeId] = (),
    max_moves: int = 8,
    apart: Collection[str] = (),
    held: Collection[tuple[int, int]] = (),
) -> dict[PartitionKey, NodeId]:
    """New leaders: ``{partition: node}`` for every partition whose leader must change.

    Args:
        wanted: every partition that exists.
        current: the assignment as stored.
        live: ``{node_id: node_epoch}`` of brokers whose lease is valid (draining ones included).
        draining: brokers shutting down: they keep nothing.
        max_moves: bound on balancing moves this round (moves forced by a dead leader are not
            bounded: those partitions are unavailable until moved).
        apart: topics whose partitions are counted and evened out among themselves, not with the
            rest (coordinator slots: they hold no data, so counted with partitions they could all
            end on one broker after restarts, which would then coordinate every group or
            transaction of the cluster).
        held: ``(node_id, node_epoch)`` of incarnations whose shared WAL is not recovered yet
            (:func:`unrecovered`): their partitions are neither moved nor counted until it is.
    """
    leaving = set(draining)
    eligible = sorted(n for n in live if n not in leaving)
    if not eligible:
        return {}
    classes: dict[str | None, list[PartitionKey]] = {}
    for key in wanted:
        classes.setdefault(key[0] if key[0] in apart else None, []).append(key)
    decided: dict[PartitionKey, NodeId] = {}
    budget = max_moves
    if held:
        waiting = set(held)
        for name, keys in classes.items():
            classes[name] = [
                k
                for k in keys
                if (r := current.get(k)) is None or (r.leader, r.leader_node_epoch) not in waiting
            ]
    for _, keys in sorted(classes.items(), key=lambda item: item[0] or ""):
        budget -= _plan_class(keys, current, live, eligible, budget, decided)
    return decided


def _plan_class(
    wanted: list[PartitionKey],
    current: Mapping[PartitionKey, Assignment],
    live: Mapping[NodeId, BrokerEpoch],
    eligible: list[NodeId],
    max_moves: int,
    decided: dict[PartitionKey, NodeId],
) -> int:
    """:func:`plan` for partitions counted together; adds to ``decided``, returns the balancing
    moves made."""
    counts = dict.fromkeys(eligible, 0)
    keep: dict[PartitionKey, NodeId] = {}
    for key in wanted:
        row = current.get(key)
        if row is not None and row.leader in counts and live.get(row.leader) == row.leader_node_epoch:
            keep[key] = row.leader
            counts[row.leader] += 1
    for key in wanted:
        row = current.get(key)
        if row is not None and row.target is not None and row.target in counts:
            if keep.get(key) != row.target:
                if key in keep:
                    counts[keep.pop(key)] -= 1
                decided[key] = row.target
                counts[row.target] += 1
            continue
        if key in keep:
            continue
        node = predicted_leader(key, eligible)
        assert node is not None
        # The predicted broker is what Metadata reported meanwhile. A partition failing over keeps
        # it unless that broker is two above the least loaded: its clients are already sending
        # there, and a second guess costs each of them a refresh (about a second). A new partition
        # has no client yet, so it goes there only if that broker is among the least loaded: one
        # above, the counts would differ by two and the balancing below would move a partition
        # that clients are using (or this one, a round later).
        if counts[node] > min(counts.values()) + (0 if row is None else 1):
            node = min(eligible, key=lambda n: (counts[n], n))
        decided[key] = node
        counts[node] += 1
    moves = 0
    while moves < max_moves:
        most = max(eligible, key=lambda n: (counts[n], n))
        least = min(eligible, key=lambda n: (counts[n], n))
        if counts[most] - counts[least] <= 1:
            break
        movable = sorted(k for k, n in keep.items() if n == most and not (current.get(k) or _UNPINNED).pinned)
        if not movable:
            break
        key = movable[len(movable) // 2]
        del keep[key]
        decided[key] = least
        counts[most] -= 1
        counts[least] += 1
        moves += 1
    return moves


_UNPINNED = Assignment(None, BrokerEpoch(0), LeaderEpoch(0))


def group_slot(group_id: str, slots: int) -> int:
    """Kafka's placement of a group on a ``__consumer_offsets`` partition: the Java string hash of
    the id, made non-negative, modulo the partition count."""
    h = 0
    for ch in group_id:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (h & 0x7FFFFFFF) % slots
