"""Durable share-partition state in the metadata database: what Kafka keeps in its share-group
state topic (``__share_group_state``), one row per (group, topic, partition).

A row holds the share-partition start offset (SPSO), end offset, state epoch and the runs of
in-flight offsets with their state and delivery count, packed as fixed-size binary entries. Each
write replaces the row in one transaction, so a ShareAcknowledge answered after its write survives
``kill -9``. Methods block and are meant for a worker thread.

Fencing: the row also holds the leader epoch of the partition leader that wrote it. A leader's
write is refused (:meth:`ShareStateStore.save` returns False) when the row was written by a newer
leader epoch (leadership moved on) or carries a newer state epoch (an administrator altered or
deleted the offsets meanwhile): the writer then drops its copy and reads the row again.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tabletopic import database
from tabletopic.broker.groups.share_partition import RecordState, Snapshot, StateRange

_md = sa.MetaData()

share_state_table = sa.Table(
    "share_partition_state",
    _md,
    sa.Column("group_id", sa.Text, primary_key=True),
    sa.Column("topic", sa.Text, primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True),
    sa.Column("state_epoch", sa.Integer, nullable=False),
    sa.Column("start_offset", sa.BigInteger, nullable=False),
    sa.Column("end_offset", sa.BigInteger, nullable=False),
    sa.Column("ranges", sa.LargeBinary, nullable=False),
    sa.Column("leader_epoch", sa.Integer, nullable=False),
)

MIGRATIONS = [database.create_tables(share_state_table)]

_RANGE = struct.Struct(">qqbh")  # first, last, state, delivery count

ShareKey = tuple[str, str, int]
"""(group id, topic, partition)."""


def encode_ranges(ranges: Iterable[StateRange]) -> bytes:
    return b"".join(_RANGE.pack(r.first, r.last, int(r.state), r.delivery_count) for r in ranges)


def decode_ranges(raw: bytes) -> tuple[StateRange, ...]:
    return tuple(
        StateRange(first, last, RecordState(state), count)
        for first, last, state, count in _RANGE.iter_unpack(raw)
    )


class ShareStateStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def migrate(self) -> None:
        database.migrate(self._engine, "share_groups", MIGRATIONS)

    def load(self, group_id: str | None = None) -> dict[ShareKey, Snapshot]:
        """Every stored share-partition (of one group when ``group_id`` is given)."""
        return {key: snapshot for key, (snapshot, _) in self._rows(group_id).items()}

    def load_one(self, key: ShareKey) -> tuple[Snapshot, int] | None:
        """One share-partition's snapshot and the leader epoch that wrote it."""
        t = share_state_table
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(t).where(_where(key))).first()
        return None if row is None else (_snapshot(row), int(row.leader_epoch))

    def save(self, key: ShareKey, snapshot: Snapshot, leader_epoch: int = 0) -> bool:
        """Write a leader's snapshot; False (nothing written) when the row is newer (see above)."""
        t = share_state_table
        with self._engine.begin() as conn:
            row = conn.execute(
                sa.select(t.c.leader_epoch, t.c.state_epoch).where(_where(key)).with_for_update()
            ).first()
            if row is not None and (
                row.leader_epoch > leader_epoch or row.state_epoch > snapshot.state_epoch
            ):
                return False
            _replace(conn, key, snapshot, leader_epoch)
        return True

    def replace_by_admin(self, key: ShareKey, start_offset: int | None) -> None:
        """AlterShareGroupOffsets (``start_offset``) or DeleteShareGroupOffsets (None): the row
        starts over or goes, and its state epoch moves past every leader's copy."""
        t = share_state_table
        with self._engine.begin() as conn:
            row = conn.execute(
                sa.select(t.c.leader_epoch, t.c.state_epoch).where(_where(key)).with_for_update()
            ).first()
            state_epoch = 0 if row is None else int(row.state_epoch) + 1
            leader_epoch = 0 if row is None else int(row.leader_epoch)
            offset = -1 if start_offset is None else start_offset  # -1: start by share.auto.offset.reset
            _replace(conn, key, Snapshot(offset, offset, state_epoch, ()), leader_epoch)

    def delete(self, keys: Iterable[ShareKey]) -> None:
        with self._engine.begin() as conn:
            for key in keys:
                conn.execute(sa.delete(share_state_table).where(_where(key)))

    def delete_topic(self, topic: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(sa.delete(share_state_table).where(share_state_table.c.topic == topic))

    def delete_group(self, group_id: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(sa.delete(share_state_table).where(share_state_table.c.group_id == group_id))

    def _rows(self, group_id: str | None) -> dict[ShareKey, tuple[Snapshot, int]]:
        t = share_state_table
        query = sa.select(t) if group_id is None else sa.select(t).where(t.c.group_id == group_id)
        with self._engine.connect() as conn:
            rows = conn.execute(query).all()
        return {
            (row.group_id, row.topic, int(row.partition)): (_snapshot(row), int(row.leader_epoch))
            for row in rows
        }


def _where(key: ShareKey) -> sa.ColumnElement[bool]:
    t = share_state_table
    group_id, topic, partition = key
    return (t.c.group_id == group_id) & (t.c.topic == topic) & (t.c.partition == partition)


def _snapshot(row: sa.Row[Any]) -> Snapshot:
    return Snapshot(
        int(row.start_offset), int(row.end_offset), int(row.state_epoch), decode_ranges(bytes(row.ranges))
    )


def _replace(conn: Connection, key: ShareKey, snapshot: Snapshot, leader_epoch: int) -> None:
    group_id, topic, partition = key
    row: dict[str, object] = {
        "group_id": group_id,
        "topic": topic,
        "partition": partition,
        "state_epoch": snapshot.state_epoch,
        "start_offset": snapshot.start_offset,
        "end_offset": snapshot.end_offset,
        "ranges": encode_ranges(snapshot.ranges),
        "leader_epoch": leader_epoch,
    }
    database.upsert(conn, share_state_table, [row])
