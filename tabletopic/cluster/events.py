"""The cluster's timeline: what the controller decided and why (failovers, moves asked for,
balancing rounds), and the brokers that joined, stopped or were unregistered, kept in the metadata
database so that every broker's console and the CLI show the same history, whichever broker was the
controller at the time.

The controller writes one row per partition whose leader changed, with the reason it can tell from
the snapshot it planned from (:func:`classify`), and one row per auto-balancer move with the
balancer's own reason. Writing is best effort: the decision itself is already committed, and a
timeline row lost to a database hiccup must not undo or delay it. The table keeps the last
:data:`KEEP` rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tabletopic.cluster.controller import PartitionKey
from tabletopic.log_limit import few_of

KEEP = 2000
# A controller move's reason is its cause, this, then who took the partition: rows of one decision
# share the cause, which is what :func:`decisions` groups them by.
CAUSE_END = "; "
# What names the partitions of an event about a broker alone (one unregistered by an operator).
NO_PARTITION = "-"
UNREGISTERED = "unregistered"  # the kind of that event
JOINED, STOPPED = "joined", "stopped"  # a broker registered (an incarnation), one stopped cleanly

_md = sa.MetaData()
events_table = sa.Table(
    "cluster_events",
    _md,
    sa.Column(
        "event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    # placed | failover | drain | reassignment | count-balance | auto-balance | unregistered |
    # joined | stopped
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
            kind, cause, effect = "failover", f"broker {source} is dead (its lease expired)", "took over"
        elif live[source] != row.leader_node_epoch:
            kind, cause, effect = "failover", f"broker {source} restarted (a new incarnation)", "took over"
        elif source in leaving:
            kind, cause, effect = "drain", f"broker {source} is shutting down (draining)", "took it"
        elif row.target == node:
            kind, cause, effect = "reassignment", "a move asked for (operator or auto-balancer)", "took it"
        else:
            kind, cause, effect = "count-balance", "partition counts evened out", "took it"
        reason = f"{cause}{CAUSE_END}broker {node} {effect}"
        events.append(ClusterEvent(kind, reason, topic, partition, source, node))
    return events


def record(engine: Engine, events: list[ClusterEvent], controller_epoch: int | None) -> None:
    """Append events (one statement) and drop those beyond the last :data:`KEEP`."""
    if events:
        with engine.begin() as conn:
            append(conn, events, controller_epoch)


def append(conn: Connection, events: list[ClusterEvent], controller_epoch: int | None) -> None:
    """:func:`record` inside the caller's transaction, for a change and its event to commit
    together."""
    e = events_table
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


@dataclass(frozen=True, slots=True)
class Decision:
    """The rows of one controller decision with one cause, read back as one entry: the partitions
    a dead broker led are moved in one round, and at 10,000 partitions one row each would push
    everything else out of any page that shows the timeline."""

    kind: str
    cause: str  # the whole reason of a decision that moved one partition
    at: str | None
    from_node: int | None
    partitions: tuple[str, ...]  # "topic-partition", user topics first
    to_nodes: tuple[tuple[int, int], ...]  # (broker, partitions it took), most first

    def where(self) -> str:
        """The partitions, the first five named: ``orders-0, orders-3 and 19 more``."""
        return few_of(self.partitions)

    def went_to(self) -> str:
        """``broker 1 (11), broker 3 (10)``."""
        return ", ".join(f"broker {node} ({count})" for node, count in self.to_nodes)

    def line(self) -> str:
        """One line of ``cluster status``: a single move with its whole reason."""
        if len(self.partitions) == 1:
            where = "" if self.partitions[0] == NO_PARTITION else f" {self.partitions[0]}"
            return f"{self.kind}{where}: {self.cause}"
        count = len(self.partitions)
        # One round can balance partitions away from two brokers for one cause: two entries, told
        # apart by their source, unless the cause names it ("broker 2 is dead").
        named = self.from_node is not None and f"broker {self.from_node} " not in self.cause
        source = f"from broker {self.from_node} " if named else ""
        return (
            f"{self.kind} of {count} partitions ({self.where()}): {self.cause}; {source}to {self.went_to()}"
        )

    def as_dict(self) -> dict[str, Any]:
        """Its fields (``to_nodes`` spelled out as objects) and the text derived from them, as the
        console and the status API show a decision."""
        return {
            **asdict(self),
            "partitions": list(self.partitions),
            "to_nodes": [{"node_id": n, "partitions": c} for n, c in self.to_nodes],
            "where": self.where() if len(self.partitions) == 1 else f"{len(self.partitions)}: {self.where()}",
            "went_to": self.went_to(),
            "summary": self.line(),
        }


def _cause(event: ClusterEvent) -> str:
    return event.reason.split(CAUSE_END, 1)[0]


def decisions(events: Sequence[ClusterEvent]) -> list[Decision]:
    """``events`` (newest first, as :func:`recent` reads them) with the rows of one decision and
    cause folded into one :class:`Decision`: same time (one transaction), kind, source broker and
    cause. An auto-balancer move keeps its own entry (each has its own reason)."""
    groups: dict[tuple[str | None, str, int | None, str], list[ClusterEvent]] = {}
    for event in events:
        groups.setdefault((event.at, event.kind, event.from_node, _cause(event)), []).append(event)
    out = []
    for (at, kind, source, cause), rows in groups.items():
        moved = sorted(
            rows, key=lambda e: ((e.topic or "").startswith("__"), e.topic or "", e.partition or 0)
        )
        names = tuple(f"{e.topic}-{e.partition}" if e.topic is not None else NO_PARTITION for e in moved)
        taken = Counter(e.to_node for e in rows if e.to_node is not None)
        whole = cause if len(rows) > 1 else rows[0].reason
        out.append(Decision(kind, whole, at, source, names, tuple(taken.most_common())))
    return out
