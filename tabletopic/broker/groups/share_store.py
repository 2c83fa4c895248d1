"""Durable share-partition state in the metadata database: what Kafka keeps in its share-group
state topic (``__share_group_state``), one row per (group, topic, partition).

A row holds the share-partition start offset (SPSO), end offset, state epoch and the runs of
in-flight offsets with their state and delivery count, packed as fixed-size binary entries. Each
write replaces the row in one transaction, so a ShareAcknowledge answered after its write survives
``kill -9``. Methods block and are meant for a worker thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Engine

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

    def load(self) -> dict[ShareKey, Snapshot]:
        t = share_state_table
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(t)).all()
        return {
            (row.group_id, row.topic, int(row.partition)): Snapshot(
                int(row.start_offset),
                int(row.end_offset),
                int(row.state_epoch),
                decode_ranges(bytes(row.ranges)),
            )
            for row in rows
        }

    def save(self, key: ShareKey, snapshot: Snapshot) -> None:
        t = share_state_table
        group_id, topic, partition = key
        where = (t.c.group_id == group_id) & (t.c.topic == topic) & (t.c.partition == partition)
        with self._engine.begin() as conn:
            conn.execute(sa.delete(t).where(where))
            conn.execute(
                sa.insert(t).values(
                    group_id=group_id,
                    topic=topic,
                    partition=partition,
                    state_epoch=snapshot.state_epoch,
                    start_offset=snapshot.start_offset,
                    end_offset=snapshot.end_offset,
                    ranges=encode_ranges(snapshot.ranges),
                )
            )

    def delete(self, keys: Iterable[ShareKey]) -> None:
        t = share_state_table
        with self._engine.begin() as conn:
            for group_id, topic, partition in keys:
                where = (t.c.group_id == group_id) & (t.c.topic == topic) & (t.c.partition == partition)
                conn.execute(sa.delete(t).where(where))

    def delete_group(self, group_id: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(sa.delete(share_state_table).where(share_state_table.c.group_id == group_id))
