"""The lease a single node (``cluster.enable=false``) holds on a PostgreSQL metadata database.

A single node opens every stream in the database and writes every table's metadata as if it were
alone. Two of them on one database (or one beside a cluster) would append to the same streams and
corrupt them, so a single node on PostgreSQL takes this lease before it opens anything, renews it
like a broker's, and gives it back when it stops. A second single node, or a cluster broker, finds
it held and refuses to start. (SQLite needs none: its database file lives in the node's own data
directory.) The lease is kept apart from ``cluster_nodes`` so the controller never counts a single
node as a broker to place partitions on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.cluster.db import live_broker, nodes_table

_md = sa.MetaData()
lease_table = sa.Table(
    "single_node_lease",
    _md,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("lease_expires", sa.DateTime(timezone=True), nullable=False),
)
MIGRATIONS = [database.create_tables(lease_table)]


@dataclass(frozen=True, slots=True)
class Holders:
    """Who else holds the database: live cluster brokers and a live single node."""

    brokers: list[int]
    single: str | None


def _expires(seconds: float) -> sa.ColumnElement[Any]:
    return sa.func.now() + sa.func.make_interval(0, 0, 0, 0, 0, 0, seconds)


class SingleNodeLease:
    """Take, renew and give back the single-node lease (PostgreSQL only; times are the database's).

    Args:
        engine: the metadata database.
        holder: who this node is (host, process), shown to the node that is refused.
        lease_s: how long the lease lasts without renewal (``broker.session.timeout.ms``).
    """

    def __init__(self, engine: Engine, holder: str, lease_s: float) -> None:
        self.engine = engine
        self.holder = holder
        self.lease_s = lease_s

    def migrate(self) -> None:
        database.migrate(self.engine, "single_node", MIGRATIONS)

    def others(self) -> Holders:
        """Live holders of the database other than this node (nothing when no table exists yet)."""
        inspector = sa.inspect(self.engine)
        brokers: list[int] = []
        single = None
        with self.engine.connect() as conn:
            if inspector.has_table(nodes_table.name):
                n = nodes_table
                rows = conn.execute(sa.select(n.c.node_id).where(live_broker(n)))
                brokers = sorted(int(r[0]) for r in rows)
            if inspector.has_table(lease_table.name):
                row = conn.execute(
                    sa.select(lease_table.c.holder).where(
                        lease_table.c.id == 1,
                        lease_table.c.holder != self.holder,
                        lease_table.c.lease_expires > sa.func.now(),
                    )
                ).first()
                single = None if row is None else str(row[0])
        return Holders(brokers, single)

    def acquire(self) -> Holders:
        """Take (or renew) the lease unless another live node holds the database.

        Returns:
            The other holders; neither brokers nor a single node when the lease is now this node's.
        """
        self.migrate()
        t = lease_table
        with self.engine.begin() as conn:
            database.insert_missing(
                conn, t, t.c.id, {"id": 1, "holder": self.holder, "lease_expires": sa.func.now()}
            )
            # The row lock serialises two single nodes starting at once: the second sees the first.
            row = conn.execute(
                sa.select(t.c.holder, t.c.lease_expires > sa.func.now()).where(t.c.id == 1).with_for_update()
            ).one()
            if row[0] != self.holder and row[1]:
                return Holders([], str(row[0]))
            others = self.others()
            if others.brokers:
                return others
            conn.execute(
                sa.update(t)
                .where(t.c.id == 1)
                .values(holder=self.holder, lease_expires=_expires(self.lease_s))
            )
        return Holders([], None)

    def renew(self) -> bool:
        """Extend the lease; False when it was lost (another node took it after it expired)."""
        t = lease_table
        with self.engine.begin() as conn:
            result = conn.execute(
                sa.update(t)
                .where(t.c.id == 1, t.c.holder == self.holder)
                .values(lease_expires=_expires(self.lease_s))
            )
            return result.rowcount == 1

    def release(self) -> None:
        """Give the lease back at once, so the next node need not wait for it to expire."""
        t = lease_table
        with self.engine.begin() as conn:
            conn.execute(
                sa.update(t).where(t.c.id == 1, t.c.holder == self.holder).values(lease_expires=sa.func.now())
            )
