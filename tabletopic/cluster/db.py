"""The cluster's tables in the metadata database (PostgreSQL) and the transactions that change
them. Every method is blocking; :class:`~tabletopic.cluster.node.ClusterNode` calls them on a
worker thread. Times are the database's (``now()``): no node's clock is trusted.

Tables:

- ``cluster_nodes``: one row per broker id; ``node_epoch`` grows at every registration, so a
  restarted broker is a new incarnation and the old one's lease renewals fail.
- ``cluster_controller``: one row; the holder of the controller lease and the controller epoch,
  which grows at every change of holder. Every controller decision is written in a transaction that
  first locks this row and checks holder and epoch.
- ``cluster_partitions``: who leads each partition, with the leader epoch (KIP-320) the leader
  opens the partition's streams with, and a reassignment target; ``version`` is the cluster
  version of the transaction that last changed the row.
- ``cluster_version``: one row, the *cluster version*, bumped by every transaction that changes
  ``cluster_partitions`` (and ``purges``, bumped when rows are deleted). A transaction bumps it
  first, so it holds the row's lock until it commits and versions commit in order: a reader that
  sees version V sees every change up to V, and the rows changed since its last read are those
  with a larger ``version``. An idle poll so reads one row instead of every partition.
- ``cluster_wals``: the shared WAL of each broker incarnation that uses one (written with its
  registration), whether it is recovered, and the broker told to take it over (see
  ``docs/cluster.md``, "Shared WAL").

Every change sends ``NOTIFY tabletopic_cluster`` (delivered when the transaction commits) with
the kind of change as payload, so waiters wake at once instead of polling.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tabletopic import database
from tabletopic.cluster import events
from tabletopic.cluster.controller import (
    Assignment,
    PartitionKey,
    WalRow,
    assign_recoverers,
    plan,
    unrecovered,
)
from tabletopic.cluster.events import create_events_table
from tabletopic.cluster.load import RECORDS_IN, LoadReport, figure
from tabletopic.fencing import Fenced
from tabletopic.ids import BrokerEpoch, ControllerEpoch, LeaderEpoch, NodeId

CHANNEL = "tabletopic_cluster"

_md = sa.MetaData()
_ts = sa.DateTime(timezone=True)

# The ``state`` of a broker that left: ``stopped`` on its own (SIGTERM, a controlled shutdown),
# ``retired`` when another broker took its shared WAL over (it was killed, paused or cut off past its
# lease), ``unregistered`` when an operator removed it from the cluster (``cluster unregister``,
# Kafka's ``kafka-cluster unregister``). None counts as live nor renews its lease; ``cluster status``
# shows the second as dead and leaves the third out. The row of an unregistered broker stays: its
# ``node_epoch`` is where a broker started again with the same id continues, so an incarnation of
# before the removal can never pass for a new one.
STOPPED, RETIRED, UNREGISTERED = "stopped", "retired", "unregistered"
GONE = (STOPPED, RETIRED, UNREGISTERED)

nodes_table = sa.Table(
    "cluster_nodes",
    _md,
    sa.Column("node_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("node_epoch", sa.BigInteger, nullable=False),
    sa.Column("rack", sa.Text, nullable=True),
    sa.Column("endpoints", sa.Text, nullable=False),  # JSON {"PLAINTEXT": ["host", port], ...}
    sa.Column("state", sa.String(16), nullable=False),  # alive | draining | stopped | retired | unregistered
    sa.Column("lease_expires", _ts, nullable=False),
    sa.Column("registered_at", _ts, nullable=False),
    sa.Column("load", sa.Text, nullable=False, server_default="{}"),  # JSON {"topic/p": [in, out]}
    # Where the other brokers reach this broker's admin API (table topics it coordinates are
    # answered there); NULL when it serves none.
    sa.Column("admin_url", sa.Text, nullable=True),
)
controller_table = sa.Table(
    "cluster_controller",
    _md,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("node_id", sa.Integer, nullable=True),
    sa.Column("node_epoch", sa.BigInteger, nullable=False),
    sa.Column("controller_epoch", sa.BigInteger, nullable=False),
    sa.Column("lease_expires", _ts, nullable=False),
)
partitions_table = sa.Table(
    "cluster_partitions",
    _md,
    sa.Column("topic", sa.Text, primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("leader_node", sa.Integer, nullable=True),
    sa.Column("leader_node_epoch", sa.BigInteger, nullable=False),
    sa.Column("leader_epoch", sa.Integer, nullable=False),
    sa.Column("target_node", sa.Integer, nullable=True),
    sa.Column("pinned", sa.Boolean, nullable=False),
    sa.Column("updated_at", _ts, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0", index=True),
)
version_table = sa.Table(
    "cluster_version",
    _md,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("purges", sa.BigInteger, nullable=False),
)
wals_table = sa.Table(
    "cluster_wals",
    _md,
    sa.Column("node_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("node_epoch", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("wal", sa.Text, nullable=False),  # the WAL directory's path, as every broker mounts it
    sa.Column("recovered", sa.Boolean, nullable=False),
    sa.Column("recoverer", sa.Integer, nullable=True),
    sa.Column("updated_at", _ts, nullable=False),
)


def _not_gone(n: sa.Table = nodes_table) -> sa.ColumnElement[bool]:
    return n.c.state.not_in(GONE)


def live_broker(n: sa.Table = nodes_table) -> sa.ColumnElement[bool]:
    """A broker incarnation counted live: its lease runs and it has not left."""
    return (n.c.lease_expires > sa.func.now()) & _not_gone(n)


# The reads of every snapshot, built once: a broker polls four times a heartbeat, and building the
# statements again each time (and SQLAlchemy working out each new one's cache key) was nearly half
# of the poll's CPU (bench/metadata_poll_bench.py).
_KNOWN_BROKERS = sa.select(nodes_table, live_broker().label("alive")).where(
    nodes_table.c.state != UNREGISTERED
)
_CONTROLLER = sa.select(
    controller_table.c.node_id,
    controller_table.c.controller_epoch,
    controller_table.c.lease_expires > sa.func.now(),
).where(controller_table.c.id == 1)
_VERSION = sa.select(version_table.c.version, version_table.c.purges).where(version_table.c.id == 1)
_OPEN_WALS = (
    sa.select(wals_table.c.node_id, wals_table.c.node_epoch, wals_table.c.wal, wals_table.c.recoverer)
    .where(wals_table.c.recovered.is_(False))
    .order_by(wals_table.c.node_id, wals_table.c.node_epoch)
)


def broker_state(node: NodeInfo) -> str:
    """One word per broker, as ``cluster status`` and the console show it: ``stopped`` (left on its
    own), ``dead`` (its lease ran out, or its WAL was taken over, without it leaving: killed,
    paused, cut off), else what it registered (``alive`` or ``draining``)."""
    if node.state == STOPPED:
        return STOPPED
    return node.state if node.alive and node.state != RETIRED else "dead"


def _add_versions(conn: Connection) -> None:
    """Migration 2: the cluster version (incremental snapshots). Databases created by migration 1
    before the ``version`` column existed get it here; fresh ones already have it (migration 1
    creates the tables as defined now)."""
    columns = {c["name"] for c in sa.inspect(conn).get_columns("cluster_partitions")}
    if "version" not in columns:
        conn.execute(sa.text("ALTER TABLE cluster_partitions ADD COLUMN version BIGINT NOT NULL DEFAULT 0"))
        conn.execute(sa.text("CREATE INDEX ix_cluster_partitions_version ON cluster_partitions (version)"))
    version_table.create(conn, checkfirst=True)
    if conn.execute(sa.select(version_table.c.id)).first() is None:
        conn.execute(sa.insert(version_table).values(id=1, version=0, purges=0))


def _add_admin_url(conn: Connection) -> None:
    """Migration 5: each broker's admin URL (fresh databases already have it from migration 1)."""
    if "admin_url" not in {c["name"] for c in sa.inspect(conn).get_columns("cluster_nodes")}:
        conn.execute(sa.text("ALTER TABLE cluster_nodes ADD COLUMN admin_url TEXT"))


MIGRATIONS = [
    database.create_tables(nodes_table, controller_table, partitions_table),
    _add_versions,
    create_events_table,
    database.create_tables(wals_table),
    _add_admin_url,
]


class ClusterError(Exception):
    """Root of the cluster package's errors."""


class NodeFenced(ClusterError, Fenced):
    """This broker's registration was taken over (a newer incarnation of the same broker id)."""


class NotController(ClusterError):
    """The controller lease is held by someone else (or this holder's epoch is over)."""


class UnregisterRefused(ClusterError):
    """A broker cannot be removed yet; the message says why, in words."""


class BrokerNotRegistered(UnregisterRefused):
    """No broker of that id is registered (Kafka's BROKER_ID_NOT_REGISTERED)."""


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: NodeId
    node_epoch: BrokerEpoch
    rack: str | None
    endpoints: dict[str, tuple[str, int]]
    state: str
    alive: bool
    # Not compared: a new report with every renewal is not a change brokers act on (only the
    # controller's balancer reads it, from the current snapshot).
    load: Mapping[str, list[float]] = field(default_factory=dict, compare=False)
    # Registered with the incarnation, so it changes only with the node epoch.
    admin_url: str | None = field(default=None, compare=False)

    def traffic(self) -> tuple[float, float]:
        """Bytes in and out per second over the balancer's window, as the broker last reported
        them with its lease; zero for one not alive (its last report is stale)."""
        if not self.alive:
            return 0.0, 0.0
        rates = [v for v in self.load.values() if len(v) >= 2]
        return float(sum(v[0] for v in rates)), float(sum(v[1] for v in rates))

    def records_in(self) -> float:
        """Records appended per second over the balancer's window, as the broker last reported
        them; zero for one not alive, and from a broker of an earlier release (bytes only)."""
        if not self.alive:
            return 0.0
        return sum(figure(v, RECORDS_IN) for v in self.load.values())


class Version(NamedTuple):
    """Where a snapshot's partitions stand: the cluster version, and how many purges (deletions
    of rows) it includes; a reader that missed a purge reads every row again."""

    version: int
    purges: int


NO_VERSION = Version(0, 0)


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What the database said at one moment: nodes, controller, leaders (at ``version``).

    ``live`` and ``eligible`` are computed once per snapshot, not once per partition a Metadata
    answer describes (10,000 of them at a time)."""

    nodes: dict[NodeId, NodeInfo]
    controller_id: int | None
    controller_epoch: int
    partitions: dict[PartitionKey, Assignment]
    version: Version = field(default_factory=lambda: NO_VERSION)
    # Shared WALs not recovered yet (a few rows, read with every snapshot).
    wals: tuple[WalRow, ...] = ()
    # {node_id: node_epoch} of brokers with a valid lease.
    live: dict[NodeId, BrokerEpoch] = field(init=False, repr=False, compare=False)
    # Sorted ids of the brokers that may lead (alive and not draining), as predicted_leader wants.
    eligible: tuple[NodeId, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        nodes = self.nodes.values()
        object.__setattr__(self, "live", {n.node_id: n.node_epoch for n in nodes if n.alive})
        eligible = tuple(sorted(n.node_id for n in nodes if n.alive and n.state == "alive"))
        object.__setattr__(self, "eligible", eligible)

    def same_as(self, other: ClusterSnapshot) -> bool:
        """Whether nothing a broker acts on differs, without comparing every partition: equal
        versions mean equal partitions."""
        return (
            self.version == other.version
            and self.controller_id == other.controller_id
            and self.controller_epoch == other.controller_epoch
            and self.nodes == other.nodes
            and self.wals == other.wals
        )


def _bump(conn: Connection, purge: bool = False) -> Version:
    """Take the next cluster version for this transaction's changes to ``cluster_partitions`` (and
    count a purge when it deletes rows). Call it before writing partition rows: the row lock it
    takes is held until commit, so versions commit in the order they were taken."""
    v = version_table
    values: dict[str, Any] = {"version": v.c.version + 1}
    if purge:
        values["purges"] = v.c.purges + 1
    row = conn.execute(
        sa.update(v).where(v.c.id == 1).values(**values).returning(v.c.version, v.c.purges)
    ).one()
    return Version(int(row[0]), int(row[1]))


def _assignments(rows: Iterable[Any]) -> dict[PartitionKey, Assignment]:
    return {
        (str(r.topic), int(r.partition)): Assignment(
            None if r.leader_node is None else NodeId(int(r.leader_node)),
            BrokerEpoch(int(r.leader_node_epoch)),
            LeaderEpoch(int(r.leader_epoch)),
            None if r.target_node is None else NodeId(int(r.target_node)),
            bool(r.pinned),
        )
        for r in rows
    }


def _notify(conn: Connection, kind: str) -> None:
    conn.execute(sa.text("SELECT pg_notify(:channel, :kind)"), {"channel": CHANNEL, "kind": kind})


def _lease(seconds: float) -> Any:
    return sa.func.now() + sa.func.make_interval(0, 0, 0, 0, 0, 0, seconds)


class ClusterMetadata:
    """Blocking access to the cluster tables (PostgreSQL only: LISTEN/NOTIFY and row locks)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def migrate(self) -> None:
        database.migrate(self.engine, "cluster", MIGRATIONS)

    # Membership ----------------------------------------------------------------------------------

    def register(
        self,
        node_id: NodeId,
        rack: str | None,
        endpoints: dict[str, tuple[str, int]],
        lease_s: float,
        wal: str | None = None,
        admin_url: str | None = None,
    ) -> BrokerEpoch:
        """Register (or re-register) ``node_id`` as a new incarnation; returns its node epoch.
        ``wal``: the shared WAL directory this incarnation writes, recorded in the same
        transaction, so no incarnation can lead a partition without its WAL being known.
        ``admin_url``: where the other brokers reach its admin API."""
        n = nodes_table
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(n.c.node_epoch).where(n.c.node_id == node_id).with_for_update()
            ).first()
            epoch = BrokerEpoch(1 if row is None else int(row[0]) + 1)
            values = {
                "node_epoch": epoch,
                "rack": rack,
                "endpoints": json.dumps(endpoints),
                "state": "alive",
                "lease_expires": _lease(lease_s),
                "registered_at": sa.func.now(),
                "load": "{}",
                "admin_url": admin_url,
            }
            if row is None:
                conn.execute(sa.insert(n).values(node_id=node_id, **values))
            else:
                conn.execute(sa.update(n).where(n.c.node_id == node_id).values(**values))
            where = f" in rack {rack}" if rack else ""
            joined = f"broker {node_id} registered{where} (node epoch {epoch})"
            events.append(conn, [events.ClusterEvent(events.JOINED, joined, to_node=node_id)], None)
            if wal is not None:
                conn.execute(
                    sa.insert(wals_table).values(
                        node_id=node_id,
                        node_epoch=epoch,
                        wal=wal,
                        recovered=False,
                        recoverer=None,
                        updated_at=sa.func.now(),
                    )
                )
            _notify(conn, "nodes")
            return epoch

    def renew(
        self, node_id: NodeId, node_epoch: BrokerEpoch, lease_s: float, load: dict[str, list[float]]
    ) -> None:
        """Extend this incarnation's lease. Raises NodeFenced when a newer one registered."""
        n = nodes_table
        with self.engine.begin() as conn:
            result = conn.execute(
                sa.update(n)
                .where(n.c.node_id == node_id, n.c.node_epoch == node_epoch, _not_gone(n))
                .values(lease_expires=_lease(lease_s), load=json.dumps(load))
            )
            if result.rowcount != 1:
                raise NodeFenced(
                    f"broker {node_id} epoch {node_epoch} is over: a newer registration replaced it, or "
                    f"its lease lapsed and another broker took its shared WAL over"
                )

    def set_state(self, node_id: NodeId, node_epoch: BrokerEpoch, state: str, expire: bool = False) -> None:
        n = nodes_table
        values: dict[str, Any] = {"state": state}
        if expire:
            values["lease_expires"] = sa.func.now()
        which = [n.c.node_id == node_id, n.c.node_epoch == node_epoch]
        if state == RETIRED:  # a broker that stopped cleanly keeps saying so when its WAL is taken over
            which.append(n.c.state != STOPPED)
        with self.engine.begin() as conn:
            # What it was, for the timeline: a stop said once, however often it is set.
            was = conn.execute(sa.select(n.c.state).where(*which).with_for_update()).scalar()
            changed = conn.execute(sa.update(n).where(*which).values(**values)).rowcount
            if changed and state == STOPPED and was != STOPPED:
                stopped = f"broker {node_id} stopped cleanly (node epoch {node_epoch})"
                events.append(conn, [events.ClusterEvent(events.STOPPED, stopped, from_node=node_id)], None)
            if expire:  # let a successor take the controller lease at once
                c = controller_table
                conn.execute(
                    sa.update(c)
                    .where(c.c.id == 1, c.c.node_id == node_id, c.c.node_epoch == node_epoch)
                    .values(lease_expires=sa.func.now())
                )
            _notify(conn, "nodes")

    def unregister(self, node_id: NodeId, by: str) -> BrokerEpoch:
        """Remove a broker that left for good from the cluster, as Kafka's UnregisterBroker does:
        it no longer shows in ``cluster status``, the console or anything else that lists brokers,
        and the timeline says who removed it (``by``). Returns the epoch of its last incarnation.

        Refused (:class:`UnregisterRefused`, saying why) while anything still depends on it: while
        its lease runs (it may still write), while it leads a partition or holds the controller
        lease (the controller moves what it led once its lease ran out), and while its shared WAL
        waits for a takeover (what the WAL holds is acknowledged data). The node row is locked
        first, so a registration of the same id cannot slip in between the checks and the
        change."""
        n, p, c = nodes_table, partitions_table, controller_table
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(n.c.node_epoch, n.c.state, live_broker(n).label("alive"))
                .where(n.c.node_id == node_id)
                .with_for_update()
            ).first()
            if row is None or row.state == UNREGISTERED:
                raise BrokerNotRegistered(f"broker {node_id} is not registered in this cluster")
            if row.alive:
                raise UnregisterRefused(
                    f"broker {node_id} is {row.state}: stop it first (SIGTERM hands its partitions to "
                    "the other brokers, then it exits)"
                )
            led = conn.execute(sa.select(sa.func.count()).where(p.c.leader_node == node_id)).scalar_one()
            controls = conn.execute(
                sa.select(c.c.id).where(c.c.node_id == node_id, c.c.lease_expires > sa.func.now())
            ).first()
            if led or controls is not None:
                what = f"{led} partition(s)" if led else "the controller lease"
                raise UnregisterRefused(
                    f"broker {node_id} still holds {what}: the controller moves them once its lease ran "
                    "out (broker.session.timeout.ms); try again in a few seconds"
                )
            waiting = [r.wal for r in self._open_wals(conn) if r.node_id == node_id]
            if waiting:
                raise UnregisterRefused(
                    f"broker {node_id}'s shared WAL {waiting[0]} waits for a live broker to take it over "
                    "(it may hold acknowledged records); try again in a few seconds"
                )
            conn.execute(
                sa.update(n)
                .where(n.c.node_id == node_id)
                .values(state=UNREGISTERED, load="{}", admin_url=None, lease_expires=sa.func.now())
            )
            epoch = BrokerEpoch(int(row.node_epoch))
            reason = f"broker {node_id} unregistered by {by} (its last incarnation was epoch {epoch})"
            events.append(conn, [events.ClusterEvent(events.UNREGISTERED, reason, from_node=node_id)], None)
            _notify(conn, "nodes")
            return epoch

    def admin_urls(self) -> dict[NodeId, str]:
        """Where each live broker serves its admin API (those serving none left out): a dead one's
        address may not even refuse a connection, and every caller would wait for it."""
        n = nodes_table
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(n.c.node_id, n.c.admin_url).where(n.c.admin_url.is_not(None), live_broker(n))
            )
            return {NodeId(int(r[0])): str(r[1]) for r in rows}

    def live_nodes_other_than(self, node_id: int) -> list[int]:
        """Brokers with a valid lease besides ``node_id`` (empty when the tables do not exist)."""
        if not sa.inspect(self.engine).has_table("cluster_nodes"):
            return []
        n = nodes_table
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(n.c.node_id).where(n.c.node_id != node_id, live_broker(n)))
            return sorted(int(r[0]) for r in rows)

    # Controller lease ----------------------------------------------------------------------------

    def acquire_controller(
        self, node_id: NodeId, node_epoch: BrokerEpoch, lease_s: float
    ) -> ControllerEpoch | None:
        """Take the controller lease if it is free, expired, or held by an older incarnation of this
        broker; returns the new controller epoch, or None.

        Only a live incarnation may: one whose lease lapsed or whose shared WAL was taken over
        (stopped) learns it is over a moment later, and as controller meanwhile it would plan from a
        cluster it is no longer part of and hold the lease from the brokers that are.

        An expired lease is taken from another broker only once that broker's own lease lapsed too
        (or it drains or stopped). The two leases are renewed apart, so a killed controller's
        broker lease outlives its controller lease by up to a heartbeat; a successor that took over
        in between planned with the dead broker alive and placed a new topic's partitions on it.
        The holder itself may take its lapsed lease back at once."""
        c, n = controller_table, nodes_table
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(c).where(c.c.id == 1).with_for_update()).first()
            live = conn.execute(
                sa.select(n.c.node_id).where(
                    n.c.node_id == node_id,
                    n.c.node_epoch == node_epoch,
                    n.c.state == "alive",
                    n.c.lease_expires > sa.func.now(),
                )
            ).first()
            if live is None:
                return None
            if row is None:  # the cluster's first controller round, perhaps on several brokers at once
                first = {"id": 1, "node_id": None, "node_epoch": 0, "controller_epoch": 0}
                database.insert_missing(conn, c, c.c.id, {**first, "lease_expires": sa.func.now()})
                conn.execute(sa.select(c).where(c.c.id == 1).with_for_update())  # lock it, as above
            holder_alive = (
                sa.select(n.c.node_id)
                .where(
                    n.c.node_id == c.c.node_id,
                    n.c.node_epoch == c.c.node_epoch,
                    n.c.state == "alive",
                    n.c.lease_expires > sa.func.now(),
                )
                .exists()
            )
            expired = conn.execute(
                sa.select(
                    c.c.node_id.is_(None)
                    | ((c.c.lease_expires < sa.func.now()) & ((c.c.node_id == node_id) | ~holder_alive))
                    | ((c.c.node_id == node_id) & (c.c.node_epoch < node_epoch))
                ).where(c.c.id == 1)
            ).scalar_one()
            if not expired:
                return None
            epoch = conn.execute(
                sa.update(c)
                .where(c.c.id == 1)
                .values(
                    node_id=node_id,
                    node_epoch=node_epoch,
                    controller_epoch=c.c.controller_epoch + 1,
                    lease_expires=_lease(lease_s),
                )
                .returning(c.c.controller_epoch)
            ).scalar_one()
            _notify(conn, "controller")
            return ControllerEpoch(int(epoch))

    def renew_controller(self, node_id: NodeId, controller_epoch: ControllerEpoch, lease_s: float) -> bool:
        c = controller_table
        with self.engine.begin() as conn:
            result = conn.execute(
                sa.update(c)
                .where(
                    c.c.id == 1,
                    c.c.node_id == node_id,
                    c.c.controller_epoch == controller_epoch,
                    c.c.lease_expires > sa.func.now(),
                )
                .values(lease_expires=_lease(lease_s))
            )
            return result.rowcount == 1

    def _check_controller(self, conn: Connection, node_id: NodeId, controller_epoch: ControllerEpoch) -> None:
        """Raise NotController unless this controller epoch holds the lease, and keep it so until
        the caller's transaction ends. FOR KEY SHARE: a contender's ``acquire_controller`` (FOR
        UPDATE) waits for the round, while the controller's own renewal (an UPDATE of the lease)
        does not: a round over thousands of partitions takes seconds under load, and a renewal
        queued behind it let the controller's lease lapse in the middle of a failover."""
        c = controller_table
        row = conn.execute(
            sa.select(c.c.node_id, c.c.controller_epoch, c.c.lease_expires > sa.func.now())
            .where(c.c.id == 1)
            .with_for_update(read=True, key_share=True)
        ).first()
        if row is None or row[0] != node_id or row[1] != controller_epoch or not row[2]:
            raise NotController(f"broker {node_id} no longer holds controller epoch {controller_epoch}")

    # Reads ---------------------------------------------------------------------------------------

    def snapshot(self, since: ClusterSnapshot | None = None) -> ClusterSnapshot:
        """What the database says now.

        Args:
            since: a snapshot this method returned before. Then only what changed after it is
                read: the nodes and the controller (a few rows, read every time because a lease
                expires without any write) and the partitions whose ``version`` is past
                ``since.version`` (none when the cluster version did not move: an idle poll reads
                one row of ``cluster_version``, whatever the partition count). A purge since then
                (deleted partitions leave no row to find) reads every partition again, as does
                no ``since``.

        One REPEATABLE READ transaction, so the version and the rows read agree.
        """
        with self.engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                nodes = {}
                for row in conn.execute(_KNOWN_BROKERS):
                    endpoints = {k: (str(e[0]), int(e[1])) for k, e in json.loads(row.endpoints).items()}
                    node_id = NodeId(int(row.node_id))
                    nodes[node_id] = NodeInfo(
                        node_id,
                        BrokerEpoch(int(row.node_epoch)),
                        row.rack,
                        endpoints,
                        row.state,
                        bool(row.alive),
                        LoadReport(row.load),
                        row.admin_url,
                    )
                ctrl = conn.execute(_CONTROLLER).first()
                stamp = conn.execute(_VERSION).first()
                version = NO_VERSION if stamp is None else Version(int(stamp[0]), int(stamp[1]))
                partitions = self._partitions_since(conn, since, version)
                wals = self._open_wals(conn)
        controller = int(ctrl[0]) if ctrl is not None and ctrl[0] is not None and ctrl[2] else None
        epoch = int(ctrl[1]) if ctrl is not None else 0
        return ClusterSnapshot(nodes, controller, epoch, partitions, version, wals)

    @staticmethod
    def _open_wals(conn: Connection) -> tuple[WalRow, ...]:
        rows = conn.execute(_OPEN_WALS)
        return tuple(
            WalRow(
                NodeId(int(r[0])),
                BrokerEpoch(int(r[1])),
                str(r[2]),
                None if r[3] is None else NodeId(int(r[3])),
            )
            for r in rows
        )

    # Shared WALs ---------------------------------------------------------------------------------

    def wal_recovered(self, node_id: int, wal: str) -> bool:
        """Mark broker ``node_id``'s WAL directory ``wal`` (its path) recovered (its takeover committed
        everything in it): the controller's next round moves its partitions. Returns whether a row
        changed (False: recovered already, or never registered)."""
        w = wals_table
        with self.engine.begin() as conn:
            result = conn.execute(
                sa.update(w)
                .where(w.c.node_id == node_id, w.c.wal == wal, w.c.recovered.is_(False))
                .values(recovered=True, updated_at=sa.func.now())
            )
            _notify(conn, "wals")
            return result.rowcount > 0

    @staticmethod
    def _partitions_since(
        conn: Connection, since: ClusterSnapshot | None, version: Version
    ) -> dict[PartitionKey, Assignment]:
        """The partitions at ``version``, read from ``since`` plus the rows changed after it when
        that is possible (same purges, not newer than now), else read whole."""
        p = partitions_table
        if since is not None and since.version == version:
            return since.partitions  # the same object: nothing to compare, nothing to copy
        if since is not None and since.version.purges == version.purges and since.version < version:
            changed = _assignments(conn.execute(sa.select(p).where(p.c.version > since.version.version)))
            return {**since.partitions, **changed}
        return _assignments(conn.execute(sa.select(p)))

    # Controller decisions ------------------------------------------------------------------------

    def reconcile(
        self,
        node_id: NodeId,
        controller_epoch: ControllerEpoch,
        wanted: Sequence[PartitionKey],
        max_moves: int,
        apart: Collection[str] = (),
    ) -> tuple[dict[PartitionKey, NodeId], Version]:
        """One controller round in one transaction conditional on ``controller_epoch``: forget
        deleted partitions, place new ones, move those of dead or draining brokers, balance (the
        partitions of ``apart`` topics among themselves). Returns the moves made and the cluster
        version the round leaves (a later version means someone else changed partitions since).

        The round locks the ``cluster_version`` row before reading the partitions, which orders it
        with every other writer of ``cluster_partitions`` (they bump the version first): what
        they wrote is read here, or waits until this round committed. So no partition row is
        locked for reading (10,000 row locks a round would each be a write), and the changes are
        written in one statement per kind. Raises NotController."""
        p, v = partitions_table, version_table
        with self.engine.begin() as conn:
            self._check_controller(conn, node_id, controller_epoch)
            stamp = conn.execute(
                sa.select(v.c.version, v.c.purges).where(v.c.id == 1).with_for_update()
            ).one()
            nodes, current = self._read_for_plan(conn)
            live = {nid: epoch for nid, (epoch, state, alive) in nodes.items() if alive}
            draining = [nid for nid, (_, state, alive) in nodes.items() if alive and state == "draining"]
            wanted_set = set(wanted)
            gone = [k for k in current if k not in wanted_set]
            wals = self._open_wals(conn)
            held = unrecovered(wals, live)
            moves = plan(wanted, current, live, draining, max_moves, apart, held)
            eligible = sorted(nid for nid in live if nid not in draining)
            self._assign_recoverers(conn, assign_recoverers(wals, live, eligible))
            # Targets reached (or impossible because the target is gone) are cleared.
            reached = [
                key
                for key, row in current.items()
                if row.target is not None
                and key not in moves
                and key in wanted_set
                and (row.leader == row.target or row.target not in live)
            ]
            if not (gone or moves or reached):
                return moves, Version(int(stamp[0]), int(stamp[1]))
            version = _bump(conn, purge=bool(gone))
            if gone:
                conn.execute(
                    sa.delete(p).where(
                        p.c.topic == sa.bindparam("k_topic"), p.c.partition == sa.bindparam("k_p")
                    ),
                    [{"k_topic": t, "k_p": i} for t, i in gone],
                )
            self._set_leaders(conn, moves, live, current, version.version)
            if reached:
                conn.execute(
                    sa.update(p)
                    .where(p.c.topic == sa.bindparam("k_topic"), p.c.partition == sa.bindparam("k_p"))
                    .values(target_node=None, version=version.version),
                    [{"k_topic": t, "k_p": i} for t, i in reached],
                )
            _notify(conn, "leaders")
            return moves, version

    @staticmethod
    def _assign_recoverers(
        conn: Connection, decided: dict[tuple[NodeId, BrokerEpoch], NodeId | None]
    ) -> None:
        """Write the controller's takeover decisions (in its round's transaction)."""
        w = wals_table
        for (node_id, node_epoch), recoverer in decided.items():
            conn.execute(
                sa.update(w)
                .where(w.c.node_id == node_id, w.c.node_epoch == node_epoch)
                .values(recoverer=recoverer, updated_at=sa.func.now())
            )
        if decided:
            _notify(conn, "wals")

    @staticmethod
    def _read_for_plan(
        conn: Connection,
    ) -> tuple[dict[NodeId, tuple[BrokerEpoch, str, bool]], dict[PartitionKey, Assignment]]:
        n, p = nodes_table, partitions_table
        alive_expr = live_broker(n)
        nodes = {
            NodeId(int(r[0])): (BrokerEpoch(int(r[1])), str(r[2]), bool(r[3]))
            for r in conn.execute(sa.select(n.c.node_id, n.c.node_epoch, n.c.state, alive_expr))
        }
        return nodes, _assignments(conn.execute(sa.select(p)))

    @staticmethod
    def _set_leaders(
        conn: Connection,
        moves: dict[PartitionKey, NodeId],
        live: dict[NodeId, BrokerEpoch],
        current: dict[PartitionKey, Assignment],
        version: int,
    ) -> None:
        """Write the round's new leaders: one INSERT for the partitions placed the first time (at
        epoch 1), one UPDATE (executed for many rows) for the others, whose leader epoch grows by
        one, above any epoch Metadata named before (:func:`~tabletopic.cluster.node.reported_leader`)."""
        p = partitions_table
        placed = [
            {
                "topic": topic,
                "partition": partition,
                "leader_node": leader,
                "leader_node_epoch": live[leader],
                "leader_epoch": 1,
                "target_node": None,
                "pinned": False,
                "version": version,
            }
            for (topic, partition), leader in moves.items()
            if (topic, partition) not in current
        ]
        if placed:
            conn.execute(sa.insert(p).values(updated_at=sa.func.now()), placed)
        moved = []
        for key, leader in moves.items():
            row = current.get(key)
            if row is not None:
                target = None if row.target == leader else row.target
                moved.append(
                    {
                        "k_topic": key[0],
                        "k_p": key[1],
                        "k_leader": leader,
                        "k_node_epoch": live[leader],
                        "k_target": target,
                    }
                )
        if moved:
            conn.execute(
                sa.update(p)
                .where(p.c.topic == sa.bindparam("k_topic"), p.c.partition == sa.bindparam("k_p"))
                .values(
                    leader_node=sa.bindparam("k_leader"),
                    leader_node_epoch=sa.bindparam("k_node_epoch"),
                    leader_epoch=p.c.leader_epoch + 1,
                    target_node=sa.bindparam("k_target"),
                    updated_at=sa.func.now(),
                    version=version,
                ),
                moved,
            )

    def request_moves(
        self, moves: Iterable[tuple[str, int, int | None]], pin: bool = True
    ) -> list[PartitionKey]:
        """Ask the controller to move partitions: ``(topic, partition, node)``; node None cancels a
        pending move. ``pin`` (an operator's reassignment) keeps partition-count balancing off the
        partition; the auto-balancer's moves are not pinned. Returns the partitions not known (yet)
        to the controller."""
        p = partitions_table
        unknown = []
        with self.engine.begin() as conn:
            version = _bump(conn).version  # first: orders this with a controller round
            for topic, partition, node in moves:
                values: dict[str, Any] = {"target_node": node, "version": version}
                if node is not None and pin:
                    values["pinned"] = True
                result = conn.execute(
                    sa.update(p).where(p.c.topic == topic, p.c.partition == partition).values(**values)
                )
                if result.rowcount != 1:
                    unknown.append((topic, partition))
            _notify(conn, "leaders")
        return unknown

    def notify(self, kind: str) -> None:
        with self.engine.begin() as conn:
            _notify(conn, kind)

    def holds_leadership(
        self, key: PartitionKey, node_id: NodeId, node_epoch: BrokerEpoch, leader_epoch: LeaderEpoch
    ) -> bool:
        """Whether this incarnation still leads ``key`` at ``leader_epoch`` and its lease is valid,
        on the database's clock: what a table coordinator (the leader of partition 0) checks right
        before it commits, so one on a dead, paused or deposed broker cannot."""
        n, p = nodes_table, partitions_table
        query = (
            sa.select(sa.func.count())
            .select_from(p.join(n, n.c.node_id == p.c.leader_node))
            .where(
                p.c.topic == key[0],
                p.c.partition == key[1],
                p.c.leader_node == node_id,
                p.c.leader_node_epoch == node_epoch,
                p.c.leader_epoch == leader_epoch,
                n.c.node_epoch == node_epoch,
                live_broker(n),
            )
        )
        with self.engine.connect() as conn:
            return bool(conn.execute(query).scalar_one())


def check_leadership(
    conn: Connection, key: PartitionKey, node_id: NodeId, node_epoch: BrokerEpoch, leader_epoch: LeaderEpoch
) -> bool:
    """Inside the caller's transaction: lock ``key``'s row of ``cluster_partitions`` (the
    controller changes leaders under the same lock, so no change slips in before the caller
    commits) and tell whether this incarnation leads it at ``leader_epoch`` with a valid lease, on
    the database's clock. Coordinator state (transactions) is written only when it does."""
    n, p = nodes_table, partitions_table
    row = conn.execute(
        sa.select(p.c.leader_node, p.c.leader_node_epoch, p.c.leader_epoch)
        .where(p.c.topic == key[0], p.c.partition == key[1])
        .with_for_update()
    ).first()
    if row is None or (row[0], row[1], row[2]) != (node_id, node_epoch, leader_epoch):
        return False
    alive = conn.execute(
        sa.select(sa.func.count()).where(
            n.c.node_id == node_id,
            n.c.node_epoch == node_epoch,
            live_broker(n),
        )
    ).scalar_one()
    return bool(alive)


def run_listener(
    dsn: str, on_notify: Callable[[str], None], stopped: Callable[[], bool], channel: str = CHANNEL
) -> None:
    """Blocking: LISTEN on ``channel`` (the cluster's by default) and call ``on_notify(payload)`` for
    each NOTIFY until ``stopped()``; after a lost connection it reconnects and reports
    ``"reconnected"``. Runs on its own thread and connection (psycopg 3)."""
    import psycopg

    while not stopped():
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"LISTEN {channel}")
                on_notify("reconnected")
                while not stopped():
                    for note in conn.notifies(timeout=0.5, stop_after=64):
                        on_notify(note.payload)
        except psycopg.Error:
            if stopped():
                return
            import time

            time.sleep(0.5)
