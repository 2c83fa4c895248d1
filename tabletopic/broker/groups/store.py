"""Durable group state in the metadata database (SQLAlchemy Core; SQLite or PostgreSQL).

Four tables: a classic group's row (generation, protocol, leader), its members (with the protocols
they joined with and their current assignment), committed offsets, and a KIP-848 group's record.
Methods are blocking and meant to run in a worker thread (``asyncio.to_thread``); each write is one
transaction, so an OffsetCommit is acknowledged only after its transaction committed (SQLite runs
with ``synchronous=FULL``).

In a cluster every write takes a *fence*: a check run first in the write's own transaction (it locks
the group's coordinator slot row, which the controller changes leaders under), so a broker that no
longer leads the slot at the epoch it loaded it with writes nothing (:class:`GroupFenced`).
"""

from __future__ import annotations

import dataclasses
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tabletopic import database
from tabletopic.broker.groups.model import GroupSnapshot, MemberSnapshot, Protocols
from tabletopic.fencing import Fenced

_md = sa.MetaData()

groups_table = sa.Table(
    "group_metadata",
    _md,
    sa.Column("group_id", sa.Text, primary_key=True),
    sa.Column("generation_id", sa.Integer, nullable=False),
    sa.Column("protocol_type", sa.Text, nullable=True),
    sa.Column("protocol_name", sa.Text, nullable=True),
    sa.Column("leader_id", sa.Text, nullable=True),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)

members_table = sa.Table(
    "group_members",
    _md,
    sa.Column("group_id", sa.Text, primary_key=True),
    sa.Column("member_id", sa.Text, primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("group_instance_id", sa.Text, nullable=True),
    sa.Column("client_id", sa.Text, nullable=False),
    sa.Column("client_host", sa.Text, nullable=False),
    sa.Column("session_timeout_ms", sa.Integer, nullable=False),
    sa.Column("rebalance_timeout_ms", sa.Integer, nullable=False),
    sa.Column("protocol_type", sa.Text, nullable=False),
    sa.Column("protocols", sa.LargeBinary, nullable=False),
    sa.Column("assignment", sa.LargeBinary, nullable=False),
)

offsets_table = sa.Table(
    "group_offsets",
    _md,
    sa.Column("group_id", sa.Text, primary_key=True),
    sa.Column("topic", sa.Text, primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True),
    sa.Column("committed_offset", sa.BigInteger, nullable=False),
    sa.Column("leader_epoch", sa.Integer, nullable=False),
    # The commit metadata as UTF-8 bytes: byte-exact with a NUL, which a PostgreSQL text column
    # refuses (the first schema had a text column ``metadata``, left unused).
    sa.Column("metadata_utf8", database.Utf8Bytes, nullable=True),
    sa.Column("commit_ms", sa.BigInteger, nullable=False),
)

# A KIP-848 group's members, subscriptions and assignments, one JSON document a group (see
# ``consumer_records.py``); its offsets are in ``group_offsets`` like every group's.
consumer_groups_table = sa.Table(
    "consumer_group_state",
    _md,
    sa.Column("group_id", sa.Text, primary_key=True),
    sa.Column("record", sa.Text, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)

MIGRATIONS = [
    database.create_tables(groups_table, members_table, offsets_table),
    database.text_to_utf8_bytes(
        "group_offsets", ("group_id", "topic", "partition"), "metadata", "metadata_utf8"
    ),
    database.create_tables(consumer_groups_table),
]

Fence = Callable[[Connection], bool]
"""Run first inside a write's transaction; False refuses the write (this broker was deposed)."""


class GroupFenced(Fenced):
    """A write of group state or offsets was refused: another broker coordinates the group's slot
    now (or this broker's lease ran out). The client gets NOT_COORDINATOR."""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_ms: int = 0


TopicPartition = tuple[str, int]


class StoredGroups(NamedTuple):
    """What a coordinator loads: the classic groups, every group's committed offsets (offsets of
    groups that never had members, i.e. "simple" committers, come without a group), and each
    KIP-848 group's record (JSON text, read by ``consumer_records``), by group id."""

    groups: list[GroupSnapshot]
    offsets: dict[str, dict[TopicPartition, CommittedOffset]]
    consumer_records: dict[str, str]


def encode_protocols(protocols: Protocols) -> bytes:
    """``(name, metadata)`` pairs as length-prefixed bytes (binary metadata, no JSON detour)."""
    out = bytearray()
    for name, data in protocols:
        raw = name.encode("utf-8")
        out += struct.pack(">I", len(raw)) + raw + struct.pack(">I", len(data)) + data
    return bytes(out)


def decode_protocols(raw: bytes) -> Protocols:
    result: list[tuple[str, bytes]] = []
    offset = 0
    while offset < len(raw):
        (n,) = struct.unpack_from(">I", raw, offset)
        name = raw[offset + 4 : offset + 4 + n].decode("utf-8")
        offset += 4 + n
        (m,) = struct.unpack_from(">I", raw, offset)
        result.append((name, bytes(raw[offset + 4 : offset + 4 + m])))
        offset += 4 + m
    return tuple(result)


# A group row holds every field of GroupSnapshot but its members (rows of their own) under the same
# name; a member row every field of MemberSnapshot (protocols encoded).
_GROUP_FIELDS = tuple(f.name for f in dataclasses.fields(GroupSnapshot) if f.name != "members")
_MEMBER_FIELDS = tuple(f.name for f in dataclasses.fields(MemberSnapshot))


def offset_rows(group_id: str, offsets: dict[TopicPartition, CommittedOffset]) -> list[dict[str, object]]:
    """The rows of ``offsets_table`` that hold ``offsets`` (a commit writes them, the offset-commit
    bench times inserting the same rows as its floor)."""
    return [
        {
            "group_id": group_id,
            "topic": topic,
            "partition": partition,
            "committed_offset": value.offset,
            "leader_epoch": value.leader_epoch,
            "metadata_utf8": value.metadata,
            "commit_ms": value.commit_ms,
        }
        for (topic, partition), value in offsets.items()
    ]


def _member_row(group_id: str, position: int, member: MemberSnapshot) -> dict[str, Any]:
    row = {name: getattr(member, name) for name in _MEMBER_FIELDS}
    row.update(group_id=group_id, position=position, protocols=encode_protocols(member.protocols))
    return row


def _member_snapshot(row: sa.RowMapping) -> MemberSnapshot:
    fields = {name: row[name] for name in _MEMBER_FIELDS}
    fields.update(protocols=decode_protocols(bytes(row["protocols"])), assignment=bytes(row["assignment"]))
    return MemberSnapshot(**fields)


class GroupStore:
    """Blocking persistence of groups and offsets; one transaction per call."""

    def __init__(self, engine: Engine, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self._clock = clock  # epoch seconds, for the groups' updated_ms

    def migrate(self) -> None:
        database.migrate(self.engine, "groups", MIGRATIONS)

    def load(self) -> StoredGroups:
        """Every persisted group, committed offset and KIP-848 group record, read on one
        connection (a coordinator taking over a slot reads them together)."""
        with self.engine.connect() as conn:
            group_rows = conn.execute(sa.select(groups_table)).mappings().all()
            member_rows = (
                conn.execute(
                    sa.select(members_table).order_by(members_table.c.group_id, members_table.c.position)
                )
                .mappings()
                .all()
            )
            offset_rows = conn.execute(sa.select(offsets_table)).mappings().all()
            table = consumer_groups_table
            records = {str(g): str(r) for g, r in conn.execute(sa.select(table.c.group_id, table.c.record))}
        members: dict[str, list[MemberSnapshot]] = {}
        for row in member_rows:
            members.setdefault(row["group_id"], []).append(_member_snapshot(row))
        groups = [
            GroupSnapshot(
                **{name: row[name] for name in _GROUP_FIELDS}, members=tuple(members.get(row["group_id"], ()))
            )
            for row in group_rows
        ]
        offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        for row in offset_rows:
            offsets.setdefault(row["group_id"], {})[(row["topic"], row["partition"])] = CommittedOffset(
                offset=row["committed_offset"],
                leader_epoch=row["leader_epoch"],
                metadata=row["metadata_utf8"],
                commit_ms=row["commit_ms"],
            )
        return StoredGroups(groups, offsets, records)

    def save_group(self, snapshot: GroupSnapshot, fence: Fence | None = None) -> None:
        """Replace the group's row and members with ``snapshot``. Raises GroupFenced."""
        now = int(self._clock() * 1000)
        with self.engine.begin() as conn:
            _check(conn, snapshot.group_id, fence)
            conn.execute(sa.delete(members_table).where(members_table.c.group_id == snapshot.group_id))
            conn.execute(sa.delete(groups_table).where(groups_table.c.group_id == snapshot.group_id))
            group_row = {name: getattr(snapshot, name) for name in _GROUP_FIELDS}
            conn.execute(sa.insert(groups_table).values(**group_row, updated_ms=now))
            if snapshot.members:
                conn.execute(
                    sa.insert(members_table),
                    [_member_row(snapshot.group_id, i, m) for i, m in enumerate(snapshot.members)],
                )

    def delete_group(self, group_id: str, fence: Fence | None = None) -> None:
        """Forget the group, its members and its offsets (DeleteGroups). Raises GroupFenced."""
        with self.engine.begin() as conn:
            _check(conn, group_id, fence)
            for table in (offsets_table, members_table, groups_table, consumer_groups_table):
                conn.execute(sa.delete(table).where(table.c.group_id == group_id))

    def save_consumer_group(self, group_id: str, record: str | None, fence: Fence | None = None) -> None:
        """Replace a KIP-848 group's record (None: it has no members left, forget it). Raises
        GroupFenced."""
        now = int(self._clock() * 1000)
        with self.engine.begin() as conn:
            _check(conn, group_id, fence)
            table = consumer_groups_table
            conn.execute(sa.delete(table).where(table.c.group_id == group_id))
            if record is not None:
                values = {"group_id": group_id, "record": record, "updated_ms": now}
                conn.execute(sa.insert(table).values(**values))

    def commit_offsets(
        self, group_id: str, offsets: dict[TopicPartition, CommittedOffset], fence: Fence | None = None
    ) -> None:
        """Insert or replace offsets in one transaction (:func:`database.upsert`). Raises
        GroupFenced."""
        if not offsets:
            return
        with self.engine.begin() as conn:
            _check(conn, group_id, fence)
            database.upsert(conn, offsets_table, offset_rows(group_id, offsets))

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], fence: Fence | None = None
    ) -> None:
        """Forget some of a group's offsets (OffsetDelete, retention, a deleted topic). Raises
        GroupFenced."""
        partitions = list(partitions)
        if not partitions:
            return
        with self.engine.begin() as conn:
            _check(conn, group_id, fence)
            _delete_offset_rows(conn, group_id, partitions)


def _delete_offset_rows(conn: Connection, group_id: str, partitions: Iterable[TopicPartition]) -> None:
    conn.execute(
        sa.delete(offsets_table).where(
            offsets_table.c.group_id == sa.bindparam("g"),
            offsets_table.c.topic == sa.bindparam("t"),
            offsets_table.c.partition == sa.bindparam("p"),
        ),
        [{"g": group_id, "t": topic, "p": partition} for topic, partition in partitions],
    )


def _check(conn: Connection, group_id: str, fence: Fence | None) -> None:
    if fence is not None and not fence(conn):
        raise GroupFenced(f"not written: group {group_id} is coordinated elsewhere")
