"""The metadata-database tables of transactions.

``transactions`` holds one row per transactional id: producer id and epoch, state, timeout, the
partitions of the open transaction (each with the stream offset it could start at) and its pending
group offsets. A state change is committed before anything acts on it, so after a crash the row says
what to finish: PrepareCommit / PrepareAbort are completed (markers written again where needed),
Ongoing is aborted. ``aborted_transactions`` is the partition-side index Fetch answers
read_committed consumers from (Kafka's .txnindex). ``txn_pending_offsets`` holds, in cluster mode,
the offsets TxnOffsetCommit gave a group's coordinator until the transaction's coordinator tells it
the outcome (the group and the transactional id are usually coordinated by different brokers).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tabletopic import database
from tabletopic.broker.transactions.model import (
    STATES,
    UNFINISHED,
    PendingOffset,
    TxnMetadata,
    TxnOffsets,
    TxnPartition,
    TxnState,
)
from tabletopic.fencing import Fenced

__all__ = ["STATES", "PendingOffset", "TxnFenced", "TxnMetadata", "TxnPartition", "TxnStore", "row_of"]

_meta = sa.MetaData()
transactions_table = sa.Table(
    "transactions",
    _meta,
    sa.Column("transactional_id", sa.String(512), primary_key=True),
    sa.Column("producer_id", sa.BigInteger, nullable=False),
    sa.Column("producer_epoch", sa.Integer, nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("timeout_ms", sa.Integer, nullable=False),
    sa.Column("started_ms", sa.BigInteger, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    sa.Column("partitions", sa.Text, nullable=False),  # JSON [[topic, partition, stream, start], ...]
    sa.Column("offsets", sa.Text, nullable=False),  # JSON {group: [[topic, partition, offset, epoch, meta]]}
)
aborted_table = sa.Table(
    "aborted_transactions",
    _meta,
    sa.Column("stream_id", sa.BigInteger, primary_key=True),
    sa.Column("producer_id", sa.BigInteger, primary_key=True),
    sa.Column("first_offset", sa.BigInteger, primary_key=True),
    sa.Column("last_offset", sa.BigInteger, nullable=False),
)
pending_offsets_table = sa.Table(
    "txn_pending_offsets",
    _meta,
    sa.Column("producer_id", sa.BigInteger, primary_key=True),
    sa.Column("group_id", sa.String(512), primary_key=True),
    sa.Column("topic", sa.String(512), primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True),
    sa.Column("committed_offset", sa.BigInteger, nullable=False),
    sa.Column("leader_epoch", sa.Integer, nullable=False),
    # UTF-8 bytes, byte-exact with a NUL (version 3; version 2's text column ``metadata`` is unused).
    sa.Column("metadata_utf8", database.Utf8Bytes, nullable=True),
)


def _create(conn: Connection) -> None:
    _meta.create_all(conn)


def _add_pending_offsets(conn: Connection) -> None:
    """Version 2: pending transactional offsets (fresh databases have them from version 1)."""
    pending_offsets_table.create(conn, checkfirst=True)


MIGRATIONS = [
    _create,
    _add_pending_offsets,
    database.text_to_utf8_bytes(
        "txn_pending_offsets", ("producer_id", "group_id", "topic", "partition"), "metadata", "metadata_utf8"
    ),
]


def row_of(txn: TxnMetadata) -> dict[str, object]:
    """The row of ``txn`` as it is now (taken on the event loop, written on a database thread)."""
    return {
        "transactional_id": txn.transactional_id,
        "producer_id": txn.producer_id,
        "producer_epoch": txn.producer_epoch,
        "state": str(txn.state),
        "timeout_ms": txn.timeout_ms,
        "started_ms": txn.started_ms,
        "updated_ms": txn.updated_ms,
        "partitions": json.dumps(
            [[p.topic, p.partition, p.stream_id, p.start] for p in txn.partitions.values()]
        ),
        "offsets": json.dumps(
            {
                group: [
                    [o.topic, o.partition, o.offset, o.leader_epoch, o.metadata] for o in offsets.values()
                ]
                for group, offsets in txn.offsets.items()
            }
        ),
    }


def _from_row(row: sa.Row[tuple[object, ...]]) -> TxnMetadata:
    txn = TxnMetadata(
        str(row.transactional_id),
        int(row.producer_id),
        int(row.producer_epoch),
        TxnState(str(row.state)),
        int(row.timeout_ms),
        int(row.started_ms),
        int(row.updated_ms),
    )
    for topic, partition, stream_id, start in json.loads(row.partitions):
        txn.partitions[(topic, partition)] = TxnPartition(topic, partition, stream_id, start)
    for group, offsets in json.loads(row.offsets).items():
        txn.offsets[group] = {
            (t, p): PendingOffset(t, p, offset, epoch, meta) for t, p, offset, epoch, meta in offsets
        }
    return txn


# The row's writes, built once: every EndTxn and AddPartitionsToTxn waits for one, and building the
# statement each time cost more than SQLite's commit.
_KEY = transactions_table.c.transactional_id == sa.bindparam("key")
_UPDATE_ROW = (
    sa.update(transactions_table)
    .where(_KEY)
    .values({c.name: sa.bindparam(c.name) for c in transactions_table.c if c.name != "transactional_id"})
)
_DELETE_ROW = sa.delete(transactions_table).where(_KEY)


def _aborted_in(conn: Connection, *where: sa.ColumnElement[bool]) -> list[tuple[int, int, int, int]]:
    """The aborted transactions ``(stream, pid, first, last)`` that match ``where``, by first offset."""
    a = aborted_table
    rows = conn.execute(sa.select(a).where(*where).order_by(a.c.first_offset))
    return [(int(r.stream_id), int(r.producer_id), int(r.first_offset), int(r.last_offset)) for r in rows]


class TxnFenced(Fenced):
    """A cluster broker no longer leads the transaction's coordinator slot: nothing was written."""


# Given the open database transaction, whether the writer still coordinates (see TxnStore.save).
Fence = Callable[[Connection], bool]


class TxnStore:
    """Blocking accessors (callers run them in a thread)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def migrate(self) -> None:
        database.migrate(self.engine, "transactions", MIGRATIONS)

    def load(self) -> tuple[list[TxnMetadata], list[tuple[int, int, int, int]]]:
        """Every transactional id, and every aborted transaction ``(stream, pid, first, last)``."""
        with self.engine.begin() as conn:
            txns = [_from_row(row) for row in conn.execute(sa.select(transactions_table))]
            aborted = _aborted_in(conn)
        return txns, aborted

    def load_transactions(self, accept: Callable[[str], bool]) -> list[TxnMetadata]:
        """The transactional ids ``accept`` selects (a cluster broker's coordinator slots)."""
        with self.engine.begin() as conn:
            return [
                _from_row(row)
                for row in conn.execute(sa.select(transactions_table))
                if accept(str(row.transactional_id))
            ]

    def load_one(self, transactional_id: str) -> TxnMetadata | None:
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(transactions_table).where(transactions_table.c.transactional_id == transactional_id)
            ).first()
        return None if row is None else _from_row(row)

    def load_for_streams(
        self, stream_ids: list[int]
    ) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int, int]]]:
        """For a partition's new leader: ``(stream, pid, start)`` of every unfinished transaction
        that added one of ``stream_ids``, and their aborted transactions ``(stream, pid, first,
        last)``."""
        wanted = set(stream_ids)
        t, a = transactions_table, aborted_table
        with self.engine.begin() as conn:
            open_txns = [
                (int(stream_id), int(row.producer_id), int(start))
                for row in conn.execute(sa.select(t).where(t.c.state.in_(UNFINISHED)))
                for _, _, stream_id, start in json.loads(row.partitions)
                if stream_id in wanted
            ]
            aborted = _aborted_in(conn, a.c.stream_id.in_(wanted))
        return open_txns, aborted

    def save(self, txn: TxnMetadata, fence: Fence | None = None, delete: bool = False) -> None:
        """Write (or ``delete``) the transactional id's row in a database transaction of its own
        (see :meth:`write_row`)."""
        with self.engine.begin() as conn:
            self.write_row(conn, txn.transactional_id, None if delete else row_of(txn), fence)

    @staticmethod
    def write_row(
        conn: Connection, transactional_id: str, row: dict[str, object] | None, fence: Fence | None
    ) -> None:
        """Write the transactional id's row (:func:`row_of`), or delete it if ``row`` is None; with
        ``fence``, in the same database transaction as the fence's check, which locks what the
        check reads. Raises TxnFenced."""
        if fence is not None and not fence(conn):
            raise TxnFenced(f"not written: transaction {transactional_id} is coordinated elsewhere")
        if row is None:
            conn.execute(_DELETE_ROW, {"key": transactional_id})
            return
        # An update, not a delete and insert: a reader locking the row (TxnOffsetCommit on the
        # group's coordinator) then sees the new version instead of no row at all.
        if conn.execute(_UPDATE_ROW, {"key": transactional_id, **row}).rowcount == 0:
            conn.execute(sa.insert(transactions_table), [row])

    def add_pending_offsets(self, commit: TxnOffsets) -> tuple[str, str] | None:
        """Keep a transaction's offsets for its group until its outcome, if the transaction is
        open with this producer and epoch and added the group (checked under the transaction row's
        lock, so its coordinator cannot end it meanwhile); otherwise the refusal: its error code's
        name and what the row said (the group's coordinator logs it, as the transaction's
        coordinator, another broker, knows the transaction only from its memory)."""
        t, o = transactions_table, pending_offsets_table
        producer_id, group_id = commit.producer_id, commit.group_id
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(t).where(t.c.transactional_id == commit.transactional_id).with_for_update()
            ).first()
            txn = None if row is None else _from_row(row)
            if txn is None or txn.producer_id != producer_id:
                found = "no row" if txn is None else f"a row with producer id {txn.producer_id}"
                return "invalid_producer_id_mapping", f"the transactional id has {found}"
            if txn.producer_epoch != commit.epoch:
                return "producer_fenced", f"the transaction's row has epoch {txn.producer_epoch}"
            if txn.state is not TxnState.ONGOING or group_id not in txn.offsets:
                groups = ", ".join(sorted(txn.offsets)) or "none"
                return "invalid_txn_state", f"the transaction's row is {txn.state} with groups {groups}"
            rows: list[dict[str, object]] = [
                {
                    "producer_id": producer_id,
                    "group_id": group_id,
                    "topic": offset.topic,
                    "partition": offset.partition,
                    "committed_offset": offset.offset,
                    "leader_epoch": offset.leader_epoch,
                    "metadata_utf8": offset.metadata,
                }
                for offset in commit.offsets
            ]
            database.upsert(conn, o, rows)
        return None

    def pending_offsets(
        self, producer_id: int, accept: Callable[[str], bool]
    ) -> dict[str, dict[tuple[str, int], PendingOffset]]:
        """The producer's pending offsets of the groups ``accept`` selects, by group."""
        o = pending_offsets_table
        result: dict[str, dict[tuple[str, int], PendingOffset]] = {}
        with self.engine.begin() as conn:
            for r in conn.execute(sa.select(o).where(o.c.producer_id == producer_id)):
                if accept(str(r.group_id)):
                    result.setdefault(str(r.group_id), {})[(str(r.topic), int(r.partition))] = PendingOffset(
                        str(r.topic),
                        int(r.partition),
                        int(r.committed_offset),
                        int(r.leader_epoch),
                        r.metadata_utf8,
                    )
        return result

    def has_pending_offsets(self, groups: list[str]) -> bool:
        """Whether a transaction still holds offsets of one of ``groups`` (cluster mode)."""
        o = pending_offsets_table
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(o.c.producer_id).where(o.c.group_id.in_(groups)).limit(1)).first()
        return row is not None

    def drop_pending_offsets(self, producer_id: int, groups: list[str]) -> None:
        o = pending_offsets_table
        if groups:
            with self.engine.begin() as conn:
                conn.execute(sa.delete(o).where((o.c.producer_id == producer_id) & o.c.group_id.in_(groups)))

    def add_aborted(self, entries: list[tuple[int, int, int, int]]) -> None:
        """Record aborted transactions; an entry written before a crash may come again (ignored)."""
        with self.engine.begin() as conn:
            for stream_id, pid, first, last in entries:
                conn.execute(
                    sa.delete(aborted_table).where(
                        (aborted_table.c.stream_id == stream_id)
                        & (aborted_table.c.producer_id == pid)
                        & (aborted_table.c.first_offset == first)
                    )
                )
                conn.execute(
                    sa.insert(aborted_table),
                    [
                        {
                            "stream_id": stream_id,
                            "producer_id": pid,
                            "first_offset": first,
                            "last_offset": last,
                        }
                    ],
                )

    def aborted_between(self, ranges: list[tuple[int, int, int]]) -> dict[int, list[tuple[int, int, int]]]:
        """For each ``(stream id, start, end)``: ``(producer id, first offset, marker offset)`` of the
        stream's aborted transactions overlapping ``[start, end)``, in one query. What a reader on
        another broker than the streams' leaders needs (the table coordinator), from the index
        every broker reads."""
        a = aborted_table
        result: dict[int, list[tuple[int, int, int]]] = {stream_id: [] for stream_id, _, _ in ranges}
        if not ranges:
            return result
        overlapping = sa.or_(
            *(
                (a.c.stream_id == stream_id) & (a.c.first_offset < end) & (a.c.last_offset >= start)
                for stream_id, start, end in ranges
            )
        )
        with self.engine.begin() as conn:
            for r in conn.execute(sa.select(a).where(overlapping).order_by(a.c.first_offset)):
                result[int(r.stream_id)].append((int(r.producer_id), int(r.first_offset), int(r.last_offset)))
        return result

    def forget_stream(self, stream_id: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.delete(aborted_table).where(aborted_table.c.stream_id == stream_id))
