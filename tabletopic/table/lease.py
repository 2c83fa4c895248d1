"""Coordinator fencing: exactly one table coordinator per topic, with a growing epoch.

A node holds a topic's lease while it renews it within ``ttl``; another node takes over only after
the lease expired, and taking over increments the epoch. The epoch is written into every ingest
snapshot, and a coordinator checks its lease inside the commit, right before the catalog's commit
request, so one that was paused (GC, network partition) past its lease and taken over sees it has
been fenced instead of committing. A pause between that check and the request is not caught here:
there the conditional commit in :mod:`tabletopic.table.commit` is what keeps the table exact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.fencing import Fenced

_md = sa.MetaData()
leases = sa.Table(
    "table_coordinator_leases",
    _md,
    sa.Column("topic", sa.String(255), primary_key=True),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("owner", sa.String(255), nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    # The claim the holder took the lease with: in a cluster, the leader epoch of the topic's
    # partition 0, whose leader runs the coordinator. A higher claim takes over at once.
    sa.Column("claim", sa.BigInteger, nullable=False, server_default="0"),
)


def _add_claim(conn: sa.Connection) -> None:
    """Version 2: the ``claim`` column (fresh databases already have it from version 1)."""
    if "claim" not in {c["name"] for c in sa.inspect(conn).get_columns("table_coordinator_leases")}:
        conn.exec_driver_sql(
            "ALTER TABLE table_coordinator_leases ADD COLUMN claim BIGINT NOT NULL DEFAULT 0"
        )


MIGRATIONS = [database.create_tables(leases), _add_claim]


class LeaseFenced(Fenced):
    """Another coordinator holds (or has taken over) the topic's lease."""


@dataclass(frozen=True, slots=True)
class Lease:
    topic: str
    owner: str
    epoch: int
    expires_at: float


class CoordinatorLeases(Protocol):
    """Who may coordinate a topic's table: :class:`LeaseManager`, or in a cluster the assembly's
    wrapper around it that also checks, right before every commit, that this broker still leads
    the topic's partition 0 at the epoch it claimed the lease with."""

    def acquire(self, topic: str, now: float | None = None, claim: int = 0) -> Lease | None:
        """Blocking: the lease to coordinate ``topic`` with now, or None when another node does."""

    def confirm(self, lease: Lease, now: float | None = None) -> Lease:
        """Blocking, right before a commit: the lease still holds; raises :class:`LeaseFenced`
        otherwise."""

    def release(self, lease: Lease) -> None:
        """Blocking: give the lease up (another node may take it at once)."""


class LeaseManager:
    def __init__(self, engine: Engine, owner: str, ttl_seconds: float = 30.0) -> None:
        self._engine = engine
        self._owner = owner
        self._ttl = ttl_seconds
        database.migrate(engine, "table_leases", MIGRATIONS)

    def acquire(self, topic: str, now: float | None = None, claim: int = 0) -> Lease | None:
        """Take or renew the lease; ``None`` when another live owner holds it with a claim at least
        as high (a higher ``claim``, a newer leader of partition 0, takes over at once)."""
        now = time.time() if now is None else now
        expires = now + self._ttl
        with self._engine.begin() as conn:
            row = conn.execute(sa.select(leases).where(leases.c.topic == topic).with_for_update()).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(
                            sa.insert(leases).values(
                                topic=topic, epoch=1, owner=self._owner, expires_at=expires, claim=claim
                            )
                        )
                except sa.exc.IntegrityError:
                    return None  # another node inserted first; it owns the lease
                return Lease(topic, self._owner, 1, expires)
            if row.owner == self._owner and row.expires_at >= now and claim >= row.claim:
                epoch = row.epoch
            elif row.expires_at < now or claim > row.claim:
                epoch = row.epoch + 1  # take-over (or re-acquire after our own expiry): fence the past
            else:
                return None
            conn.execute(
                sa.update(leases)
                .where(leases.c.topic == topic)
                .values(epoch=epoch, owner=self._owner, expires_at=expires, claim=max(claim, row.claim))
            )
            return Lease(topic, self._owner, epoch, expires)

    def confirm(self, lease: Lease, now: float | None = None) -> Lease:
        """Renew ``lease`` right before a commit, or raise :class:`LeaseFenced` if another node took over.

        A lease that merely expired while a long job ran is still ours as long as nobody took it:
        a take-over always changes the owner and increments the epoch.
        """
        now = time.time() if now is None else now
        expires = now + self._ttl
        with self._engine.begin() as conn:
            updated = conn.execute(
                sa.update(leases)
                .where(
                    leases.c.topic == lease.topic,
                    leases.c.owner == self._owner,
                    leases.c.epoch == lease.epoch,
                )
                .values(expires_at=expires)
            ).rowcount
        if updated != 1:
            raise LeaseFenced(
                f"coordinator lease of {lease.topic} (epoch {lease.epoch}) was taken over by another node"
            )
        return Lease(lease.topic, self._owner, lease.epoch, expires)

    def release(self, lease: Lease) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                sa.update(leases)
                .where(
                    leases.c.topic == lease.topic,
                    leases.c.owner == self._owner,
                    leases.c.epoch == lease.epoch,
                )
                .values(expires_at=0.0)
            )
