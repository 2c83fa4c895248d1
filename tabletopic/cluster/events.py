"""The cluster's timeline: what the controller decided and why (failovers, moves asked for,
balancing rounds), kept in the metadata database so that every broker's console and the CLI show
the same history, whichever broker was the controller at the time.

The controller writes one row per partition whose leader changed, with the reason it can tell from
the snapshot it planned from (:func:`classify`), and one row per auto-balancer move with the
balancer's own reason. Writing is best effort: the decision itself is already committed, and a
timeline row lost to a database hiccup must not undo or delay it. The table keeps the last
:data:`KEEP` rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tabletopic.cluster.controller import PartitionKey

KEEP = 2000

_md = sa.MetaData()
events_table = sa.Table(
    "cluster_events",
    _md,
    sa.Column(
        "event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    # placed | failover | drain | reassignment | count-balance | auto-balance
    sa.Column("kind", sa.String(24), nullable=False),
    sa.Column("topic", sa.Text, nullable=True),
    sa.Column("partition", sa.Integer, nullable=True),
    sa.Column("from_node", sa.Integer, nullable=True),
    sa.Column("to_node", sa.Integer, nullable=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("controller_epoch", sa.BigInteger, nullable=True),
)


def create_events_table(conn: Connection) -> None:
    """Migration 3 of the cluster tables: the timeline."""
    events_table.create(conn, checkfirst=True)


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    kind: str
    reason: str
    topic: str | None = None
    partition: int | None = None
    from_node: int | None = None
    to_node: int | None = None
    at: str | None = None  # ISO time, as read back

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class PriorRow:
    """What the controller knew of a partition before its round (a slice of the assignment row)."""

    leader: int | None
    leader_node_epoch: int
    target: int | None


def classify(
    moves: Mapping[PartitionKey, int],
    before: Mapping[PartitionKey, PriorRow],
    live: Mapping[int, int],
    draining: Iterable[int],
) -> list[ClusterEvent]:
    """One event per move of a controller round, with the reason read from what it planned from:
    a new partition, a leader that died (or restarted: an older node epoch), a draining leader, a
    reassignment asked for, or count balancing."""
    leaving = set(draining)
    events = []
    for (topic, partition), node in sorted(moves.items()):
        row = before.get((topic, partition))
        if row is None or row.leader is None:
            events.append(
                ClusterEvent("placed", f"new partition placed on broker {node}", topic, partition, None, node)
            )
            continue
        source = row.leader
        if source not in live:
            kind, reason = "failover", f"broker {source} is dead (its lease expired); broker {node} took over"
        elif live[source] != row.leader_node_epoch:
            kind, reason = (
                "failover",
                f"broker {source} restarted (a new incarnation); broker {node} took over",
            )
        elif source in leaving:
            kind, reason = "drain", f"broker {source} is shutting down (draining); handed to broker {node}"
        elif row.target == node:
            kind, reason = "reassignment", f"move to broker {node} asked for (operator or auto-balancer)"
        else:
            kind, reason = "count-balance", f"partition counts evened out: broker {source} -> broker {node}"
        events.append(ClusterEvent(kind, reason, topic, partition, source, node))
    return events


def record(engine: Engine, events: list[ClusterEvent], controller_epoch: int | None) -> None:
    """Append events (one statement) and drop those beyond the last :data:`KEEP`."""
    if not events:
        return
    e = events_table
    with engine.begin() as conn:
        conn.execute(
            sa.insert(e),
            [
                {
                    "kind": ev.kind,
                    "reason": ev.reason,
                    "topic": ev.topic,
                    "partition": ev.partition,
                    "from_node": ev.from_node,
                    "to_node": ev.to_node,
                    "controller_epoch": controller_epoch,
                }
                for ev in events
            ],
        )
        newest = conn.execute(sa.select(sa.func.max(e.c.event_id))).scalar()
        if newest is not None and int(newest) > KEEP:
            conn.execute(sa.delete(e).where(e.c.event_id <= int(newest) - KEEP))


def recent(engine: Engine, limit: int = 200, include_placed: bool = False) -> list[ClusterEvent]:
    """The newest events first; first placements of new partitions only when asked (a topic of
    10,000 partitions would fill the timeline with them)."""
    e = events_table
    query = sa.select(e).order_by(e.c.event_id.desc()).limit(limit)
    if not include_placed:
        query = query.where(e.c.kind != "placed")
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("cluster_events"):
            return []
        rows = list(conn.execute(query))
    return [
        ClusterEvent(
            str(r.kind),
            str(r.reason),
            r.topic,
            r.partition,
            r.from_node,
            r.to_node,
            r.at.isoformat(timespec="seconds") if r.at is not None else None,
        )
        for r in rows
    ]
