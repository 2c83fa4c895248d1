"""The controller's auto-balancer: every ``auto.balancer.detect.interval.ms`` it reads the load each
live broker reported with its lease (bytes in/out per second per partition it leads), plans a
bounded round with :func:`tabletopic.cluster.balancer.plan_round` and asks for the moves through
the same path as a reassignment (a target the controller honours at its next decision). The
planner itself is pure; this module only decides when to run it and remembers what it moved.

Anti-thrash, on top of the planner's own rules: a partition moved by the balancer is left alone for
``auto.balancer.cooldown.ms``; after a round that moved something the next one waits at least one
and a half metrics windows, so the loads it plans with include what the new leaders took over.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from tabletopic.cluster.balancer import BalancerSettings, PartitionLoad, Plan, plan_round
from tabletopic.cluster.controller import PartitionKey
from tabletopic.cluster.db import ClusterSnapshot
from tabletopic.ids import NodeId

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AutoBalancerSettings:
    enabled: bool = True
    detect_interval_s: float = 60.0
    metrics_window_s: float = 10.0
    planner: BalancerSettings = field(default_factory=BalancerSettings)


def parse_load_key(key: str) -> PartitionKey | None:
    """``"topic/partition"`` as reported in a node's load (topic names have no ``/``)."""
    topic, _, partition = key.rpartition("/")
    if not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def partition_loads(snapshot: ClusterSnapshot) -> tuple[list[NodeId], list[PartitionLoad]]:
    """The brokers that may lead (alive and not draining) and every reported partition's load,
    attributed to the leader the controller placed (a report from a broker that no longer leads the
    partition is ignored)."""
    brokers = sorted(n.node_id for n in snapshot.nodes.values() if n.alive and n.state == "alive")
    loads = []
    for node in snapshot.nodes.values():
        if not node.alive:
            continue
        for name, rates in node.load.items():
            key = parse_load_key(name)
            row = None if key is None else snapshot.partitions.get(key)
            if key is None or row is None or row.leader != node.node_id or len(rates) < 2:
                continue
            loads.append(PartitionLoad(key[0], key[1], node.node_id, float(rates[0]), float(rates[1])))
    return brokers, loads


def plan_for(
    snapshot: ClusterSnapshot,
    settings: BalancerSettings,
    recently_moved: Mapping[str, float] | None = None,
    now: float = 0.0,
) -> Plan:
    """One round's plan for the cluster as ``snapshot`` shows it (also ``cluster balance --dry-run``)."""
    brokers, loads = partition_loads(snapshot)
    return plan_round(brokers, loads, settings, recently_moved=recently_moved, now=now)


class AutoBalancer:
    """The controller's balancing rounds (state: when it last ran, what it moved and when)."""

    def __init__(self, settings: AutoBalancerSettings) -> None:
        self.settings = settings
        self.moved_at: dict[str, float] = {}
        self._next_round = 0.0
        self.last_plan: Plan | None = None

    def busy(self, snapshot: ClusterSnapshot) -> bool:
        """Whether load balancing is in charge: enabled and the mean load per broker is above the
        idle threshold (then partition-count balancing pauses)."""
        if not self.settings.enabled:
            return False
        brokers, loads = partition_loads(snapshot)
        if not brokers:
            return False
        mean_in = sum(p.bytes_in for p in loads) / len(brokers)
        mean_out = sum(p.bytes_out for p in loads) / len(brokers)
        return max(mean_in, mean_out) >= self.settings.planner.min_bytes_per_second

    def round(self, snapshot: ClusterSnapshot, now: float) -> Plan | None:
        """The plan of a round if one is due at ``now`` (monotonic seconds), else None. The caller
        applies the moves; they are remembered for the cooldown as soon as planned."""
        if not self.settings.enabled or now < self._next_round:
            return None
        plan = plan_for(snapshot, self.settings.planner, self.moved_at, now)
        self.last_plan = plan
        wait = self.settings.detect_interval_s
        if plan.moves:
            wait = max(wait, 1.5 * self.settings.metrics_window_s)
            for move in plan.moves:
                self.moved_at[f"{move.topic}-{move.partition}"] = now
        self._next_round = now + wait
        cutoff = now - self.settings.planner.cooldown_seconds
        self.moved_at = {k: t for k, t in self.moved_at.items() if t >= cutoff}
        return plan
