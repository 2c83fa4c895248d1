"""Produce hand-over through object storage (rack-aware routing): a broker in the client's zone
receives a Produce for a partition led in another zone, writes the batches to an object, and
records a hand-over row here; the leader (woken by ``NOTIFY tabletopic_handoff``) reads the object,
appends it through its normal produce path and writes the result back. No record byte crosses a
zone over a socket between brokers: only this row does, through the database.

Rows are processed per partition in id order (the proxy submits a partition's hand-overs one at a
time), so an idempotent producer's sequences arrive at the leader in the order it sent them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.cluster.db import run_listener

log = logging.getLogger(__name__)

CHANNEL = "tabletopic_handoff"

_md = sa.MetaData()
handoffs_table = sa.Table(
    "cluster_handoffs",
    _md,
    sa.Column("handoff_id", sa.BigInteger, primary_key=True, autoincrement=True),
    sa.Column("topic", sa.Text, nullable=False),
    sa.Column("partition", sa.Integer, nullable=False),
    sa.Column("object_key", sa.Text, nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # pending | claimed | done
    sa.Column("claimed_by", sa.Integer, nullable=True),
    sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("result", sa.Text, nullable=True),  # JSON: the leader's produce answer
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("cluster_handoffs_state", "state", "handoff_id"),
)

MIGRATIONS = [database.create_tables(handoffs_table)]


@dataclass(frozen=True, slots=True)
class Handoff:
    handoff_id: int
    topic: str
    partition: int
    object_key: str
    size: int


class Handoffs:
    """Blocking access to the hand-over rows (call from a worker thread)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def migrate(self) -> None:
        database.migrate(self.engine, "cluster_handoffs", MIGRATIONS)

    def submit(self, topic: str, partition: int, object_key: str, size: int) -> int:
        h = handoffs_table
        with self.engine.begin() as conn:
            handoff_id = conn.execute(
                sa.insert(h)
                .values(
                    topic=topic,
                    partition=partition,
                    object_key=object_key,
                    size=size,
                    state="pending",
                    created_at=sa.func.now(),
                )
                .returning(h.c.handoff_id)
            ).scalar_one()
            conn.execute(sa.text("SELECT pg_notify(:c, 'submitted')"), {"c": CHANNEL})
            return int(handoff_id)

    def claim(self, node_id: int, led: Callable[[str, int], bool], stale_s: float = 15.0) -> list[Handoff]:
        """Claim the pending hand-overs of partitions this broker leads (and ones claimed by a
        broker that went away without answering), oldest first."""
        h = handoffs_table
        stale = sa.func.now() - sa.func.make_interval(0, 0, 0, 0, 0, 0, stale_s)
        with self.engine.begin() as conn:
            rows = conn.execute(
                sa.select(h.c.handoff_id, h.c.topic, h.c.partition, h.c.object_key, h.c.size)
                .where((h.c.state == "pending") | ((h.c.state == "claimed") & (h.c.claimed_at < stale)))
                .order_by(h.c.handoff_id)
                .with_for_update(skip_locked=True)
            ).all()
            mine = [
                Handoff(int(r[0]), str(r[1]), int(r[2]), str(r[3]), int(r[4]))
                for r in rows
                if led(r[1], r[2])
            ]
            if mine:
                conn.execute(
                    sa.update(h)
                    .where(h.c.handoff_id.in_([m.handoff_id for m in mine]))
                    .values(state="claimed", claimed_by=node_id, claimed_at=sa.func.now())
                )
            return mine

    def complete(self, handoff_id: int, result: dict[str, Any]) -> None:
        h = handoffs_table
        with self.engine.begin() as conn:
            conn.execute(
                sa.update(h)
                .where(h.c.handoff_id == handoff_id)
                .values(state="done", result=json.dumps(result))
            )
            conn.execute(sa.text("SELECT pg_notify(:c, 'done')"), {"c": CHANNEL})

    def results(self, handoff_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The answers of those hand-overs that are done; their rows are deleted."""
        h = handoffs_table
        ids = list(handoff_ids)
        if not ids:
            return {}
        with self.engine.begin() as conn:
            rows = conn.execute(
                sa.delete(h)
                .where(h.c.handoff_id.in_(ids), h.c.state == "done")
                .returning(h.c.handoff_id, h.c.result)
            ).all()
        return {int(r[0]): json.loads(r[1]) for r in rows}

    def abandon(self, handoff_id: int) -> bool:
        """Withdraw a hand-over nobody claimed yet (the proxy gave up waiting); False if it was."""
        h = handoffs_table
        with self.engine.begin() as conn:
            result = conn.execute(sa.delete(h).where(h.c.handoff_id == handoff_id, h.c.state == "pending"))
            return bool(result.rowcount)


def listen(dsn: str, on_notify: Callable[[str], None], stopped: Callable[[], bool]) -> None:
    """Blocking: LISTEN on the hand-over channel until ``stopped()`` (runs on its own thread)."""
    run_listener(dsn, on_notify, stopped, CHANNEL)
