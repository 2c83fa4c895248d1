"""Registry tables in the shared metadata database (SQLAlchemy Core) and the primitives on them.

Every function takes an open :class:`~sqlalchemy.engine.Connection`, so the caller decides what
shares one transaction; the semantics (Confluent's rules) live in :mod:`.registry`.

Ids come from one counter row that only ever grows. A registration locks it first
(``SELECT … FOR UPDATE``; on SQLite ``BEGIN IMMEDIATE`` already serialises writers), so several
nodes sharing one PostgreSQL database hand out distinct ids, and ids of permanently deleted schemas
are never handed out again — not even after a restart. ``sr_schemas.id`` and the
``(subject, version)`` primary key back this up should a writer ever bypass the lock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tabletopic import database
from tabletopic.database import Migration
from tabletopic.schema_registry.contexts import DEFAULT_CONTEXT, context_of, key_range
from tabletopic.schema_registry.formats.base import SchemaReference

GLOBAL = ""  # subject key of the global config and mode rows (Confluent subjects are never empty)
SCHEMA_ID_COUNTER = "schema_id"

metadata = sa.MetaData()
# Stored schema keys are 64-bit (see :mod:`.contexts`); SQLite's INTEGER already is, and keeps the
# rowid alias only when spelled INTEGER.
SchemaKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

schemas_table = sa.Table(
    "sr_schemas",
    metadata,
    sa.Column("id", SchemaKey, primary_key=True, autoincrement=False),
    sa.Column("schema_type", sa.String(16), nullable=False),
    sa.Column("schema", sa.Text, nullable=False),
    sa.Column("refs", sa.Text, nullable=False, default="[]"),
    sa.Column("fingerprint", sa.String(64), nullable=False, index=True),
    # The data contract registered with the schema (``metadata`` and ``ruleSet``) as compact JSON,
    # "" when none: part of the schema's identity, as in Confluent.
    sa.Column("contract", sa.Text, nullable=False, default="", server_default=""),
    # The fingerprint of the schema without its contract (equal to ``fingerprint`` when it has
    # none): a schema registered or looked up without ``metadata``/``ruleSet`` finds the one stored
    # with them through this index instead of comparing schema texts.
    sa.Column("bare_fingerprint", sa.String(64), nullable=True, index=True),
)
versions_table = sa.Table(
    "sr_versions",
    metadata,
    sa.Column("subject", sa.String(1024), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("schema_id", SchemaKey, nullable=False, index=True),
    sa.Column("deleted", sa.Boolean, nullable=False, default=False),
)
references_table = sa.Table(
    "sr_references",
    metadata,
    sa.Column("schema_id", SchemaKey, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(1024), primary_key=True),
    sa.Column("subject", sa.String(1024), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Index("sr_references_target", "subject", "version"),
)
config_table = sa.Table(
    "sr_config",
    metadata,
    sa.Column("subject", sa.String(1024), primary_key=True),
    sa.Column("compatibility", sa.String(32), nullable=False),
)
mode_table = sa.Table(
    "sr_mode",
    metadata,
    sa.Column("subject", sa.String(1024), primary_key=True),
    sa.Column("mode", sa.String(32), nullable=False),
)
contexts_table = sa.Table(
    "sr_contexts",
    metadata,
    # A named context and its number (the high half of its schemas' keys); the default context
    # is number 0 and has no row.
    sa.Column("name", sa.String(1024), primary_key=True),
    sa.Column("number", sa.Integer, nullable=False, unique=True),
)
counters_table = sa.Table(
    "sr_counters",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)


def sqlite_read_engine(engine: Engine) -> Engine | None:
    """For SQLite, a second engine whose transactions begin DEFERRED.

    The shared metadata engine begins every transaction IMMEDIATE (taking the write lock) so writers
    never deadlock; for the registry's many reads that would queue every lookup behind — and in
    front of — the storage layer's WAL commits. In WAL mode a deferred read transaction sees one
    consistent snapshot without blocking anyone. ``None`` for other databases.
    """
    if engine.dialect.name != "sqlite":
        return None
    return database.create_engine(engine.url.render_as_string(hide_password=False), sqlite_read_only=True)


def sqlite_write_engine(engine: Engine, synchronous: str) -> Engine | None:
    """For SQLite, the registry's own engine for writes, with ``PRAGMA synchronous`` as configured
    (``schema.registry.sqlite.synchronous``); the shared engine keeps ``FULL`` for everything else.

    In WAL mode ``NORMAL`` commits without an fsync: the commit is in the operating system's hands,
    so a killed process loses nothing, while a power cut may lose the last commits (the database
    stays consistent). ``None`` for other databases, whose server decides.
    """
    if engine.dialect.name != "sqlite":
        return None
    url = engine.url.render_as_string(hide_password=False)
    return database.create_engine(url, sqlite_synchronous=synchronous)


def _create_v1(conn: Connection) -> None:
    metadata.create_all(conn, checkfirst=True)
    # Idempotent: a node that lost a start-up race re-runs this after the winner committed.
    exists = conn.execute(
        sa.select(counters_table.c.name).where(counters_table.c.name == SCHEMA_ID_COUNTER)
    ).first()
    if exists is None:
        conn.execute(sa.insert(counters_table).values(name=SCHEMA_ID_COUNTER, value=0))


def _add_contract_v2(conn: Connection) -> None:
    # Fresh databases got the column from create_all in v1; older ones gain it here.
    columns = {c["name"] for c in sa.inspect(conn).get_columns("sr_schemas")}
    if "contract" not in columns:
        conn.exec_driver_sql("ALTER TABLE sr_schemas ADD COLUMN contract TEXT NOT NULL DEFAULT ''")


def _add_bare_fingerprint_v3(conn: Connection) -> None:
    columns = {c["name"] for c in sa.inspect(conn).get_columns("sr_schemas")}
    if "bare_fingerprint" not in columns:
        conn.exec_driver_sql("ALTER TABLE sr_schemas ADD COLUMN bare_fingerprint VARCHAR(64)")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_sr_schemas_bare_fingerprint ON sr_schemas (bare_fingerprint)"
    )
    t = schemas_table.c
    missing = conn.execute(
        sa.select(t.id, t.schema_type, t.schema, t.refs).where(t.bare_fingerprint.is_(None))
    ).all()
    for row in missing:
        conn.execute(
            sa.update(schemas_table)
            .where(t.id == row.id)
            .values(bare_fingerprint=bare_fingerprint(row.schema_type, row.schema, row.refs))
        )


def _contexts_v4(conn: Connection) -> None:
    contexts_table.create(conn, checkfirst=True)
    if conn.dialect.name == "postgresql":
        for table in ("sr_schemas", "sr_versions", "sr_references"):
            column = "id" if table == "sr_schemas" else "schema_id"
            conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE BIGINT")


MIGRATIONS: Sequence[Migration] = (_create_v1, _add_contract_v2, _add_bare_fingerprint_v3, _contexts_v4)


def bare_fingerprint(schema_type: str, text: str, encoded_references: str) -> str:
    """The identity of a schema without a contract (see :func:`.model.fingerprint`)."""
    return hashlib.sha256(f"{schema_type}\n{text}\n{encoded_references}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class SchemaRow:
    id: int
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()
    contract: str = ""


@dataclass(frozen=True, slots=True)
class VersionRow:
    subject: str
    version: int
    schema_id: int
    deleted: bool


def encode_references(references: Sequence[SchemaReference]) -> str:
    return json.dumps([[r.name, r.subject, r.version] for r in references], separators=(",", ":"))


def _schema_row(row: sa.Row) -> SchemaRow:  # type: ignore[type-arg]
    refs = tuple(
        SchemaReference(name, subject, int(version)) for name, subject, version in json.loads(row.refs)
    )
    return SchemaRow(
        id=int(row.id),
        schema_type=row.schema_type,
        schema=row.schema,
        references=refs,
        contract=row.contract or "",
    )


def _version_row(row: sa.Row) -> VersionRow:  # type: ignore[type-arg]
    return VersionRow(row.subject, int(row.version), int(row.schema_id), bool(row.deleted))


# --- ids -------------------------------------------------------------------------------------------


def max_id(conn: Connection) -> int:
    """The highest id handed out so far (what ``fetchMaxId=true`` answers)."""
    row = conn.execute(
        sa.select(counters_table.c.value).where(counters_table.c.name == SCHEMA_ID_COUNTER)
    ).one()
    return int(row.value)


def lock_ids(conn: Connection) -> int:
    """Take the id counter's row lock for the rest of the transaction; return its value."""
    row = conn.execute(
        sa.select(counters_table.c.value).where(counters_table.c.name == SCHEMA_ID_COUNTER).with_for_update()
    ).one()
    return int(row.value)


_NEXT_ID = (
    sa.update(counters_table)
    .where(counters_table.c.name == sa.bindparam("counter"))
    .values(value=counters_table.c.value + 1)
    .returning(counters_table.c.value)
)


def _counter(context_number: int) -> str:
    return SCHEMA_ID_COUNTER if context_number == 0 else f"{SCHEMA_ID_COUNTER}@{context_number}"


def next_id(conn: Connection, context_number: int = 0) -> int:
    """Take the context's next id: one statement that also takes the counter's row lock."""
    return int(conn.execute(_NEXT_ID, {"counter": _counter(context_number)}).scalar_one())


def context_number(conn: Connection, context: str, create: bool = False) -> int | None:
    """The number of ``context`` (0 for the default one); with ``create``, a new context gets the
    next number and an id counter of its own (callers hold the registry's write lock)."""
    if context == DEFAULT_CONTEXT:
        return 0
    t = contexts_table.c
    found = conn.execute(sa.select(t.number).where(t.name == context)).scalar()
    if found is not None or not create:
        return None if found is None else int(found)
    number = int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(t.number), 0))).scalar_one()) + 1
    conn.execute(sa.insert(contexts_table).values(name=context, number=number))
    counter = counters_table.c
    if conn.execute(sa.select(counter.value).where(counter.name == _counter(number))).first() is None:
        conn.execute(sa.insert(counters_table).values(name=_counter(number), value=0))
    return number


def context_name(conn: Connection, number: int) -> str:
    if number == 0:
        return DEFAULT_CONTEXT
    t = contexts_table.c
    return str(conn.execute(sa.select(t.name).where(t.number == number)).scalar_one())


def raise_ids_to(conn: Connection, at_least: int, context_number: int = 0) -> None:
    """After an IMPORT with an explicit id: later ids must come after it."""
    conn.execute(
        sa.update(counters_table)
        .where(counters_table.c.name == _counter(context_number), counters_table.c.value < at_least)
        .values(value=at_least)
    )


# --- schemas ---------------------------------------------------------------------------------------


# The hottest statements are built once: SQLAlchemy then reuses their compiled form, and a request
# pays for neither building nor compiling a query.
_SCHEMA_BY_ID = sa.select(schemas_table).where(schemas_table.c.id == sa.bindparam("id"))
_VERSIONS = (
    sa.select(versions_table)
    .where(versions_table.c.subject == sa.bindparam("subject"))
    .order_by(versions_table.c.version)
)
_LIVE_VERSIONS = (
    sa.select(versions_table)
    .where(versions_table.c.subject == sa.bindparam("subject"), versions_table.c.deleted.is_(False))
    .order_by(versions_table.c.version)
)
_LATEST = (
    sa.select(versions_table)
    .where(versions_table.c.subject == sa.bindparam("subject"))
    .order_by(versions_table.c.version.desc())
    .limit(1)
)
_LATEST_LIVE = (
    sa.select(versions_table)
    .where(versions_table.c.subject == sa.bindparam("subject"), versions_table.c.deleted.is_(False))
    .order_by(versions_table.c.version.desc())
    .limit(1)
)
_ONE_VERSION = sa.select(versions_table).where(
    versions_table.c.subject == sa.bindparam("subject"), versions_table.c.version == sa.bindparam("version")
)
_SCHEMA_BY_FINGERPRINT = (
    sa.select(schemas_table)
    .where(
        schemas_table.c.fingerprint == sa.bindparam("fingerprint"),
        schemas_table.c.id.between(sa.bindparam("low"), sa.bindparam("high")),
    )
    .order_by(schemas_table.c.id)
    .limit(1)
)


def schema_by_id(conn: Connection, schema_id: int) -> SchemaRow | None:
    row = conn.execute(_SCHEMA_BY_ID, {"id": schema_id}).first()
    return None if row is None else _schema_row(row)


def schema_by_fingerprint(conn: Connection, fingerprint: str, context_number: int = 0) -> SchemaRow | None:
    """The first schema of a context with ``fingerprint`` (a schema has one id per context)."""
    low, high = key_range(context_number)
    row = conn.execute(_SCHEMA_BY_FINGERPRINT, {"fingerprint": fingerprint, "low": low, "high": high}).first()
    return None if row is None else _schema_row(row)


def schema_by_fingerprint_prefix(conn: Connection, prefix: str) -> SchemaRow | None:
    """The first schema whose fingerprint starts with ``prefix`` (a GUID is the first 128 bits of
    the fingerprint; a range on the indexed column finds it without a LIKE scan)."""
    row = conn.execute(
        sa.select(schemas_table)
        .where(schemas_table.c.fingerprint >= prefix, schemas_table.c.fingerprint < prefix + "g")
        .order_by(schemas_table.c.id)
    ).first()
    return None if row is None else _schema_row(row)


_INSERT_SCHEMA = sa.insert(schemas_table)
_INSERT_REFERENCE = sa.insert(references_table)
_INSERT_VERSION = sa.insert(versions_table)


def insert_schema(conn: Connection, row: SchemaRow, fingerprint: str) -> None:
    refs = encode_references(row.references)
    conn.execute(
        _INSERT_SCHEMA,
        {
            "id": row.id,
            "schema_type": row.schema_type,
            "schema": row.schema,
            "refs": refs,
            "fingerprint": fingerprint,
            "contract": row.contract,
            "bare_fingerprint": bare_fingerprint(row.schema_type, row.schema, refs),
        },
    )
    if row.references:
        conn.execute(
            _INSERT_REFERENCE,
            [
                {"schema_id": row.id, "name": ref.name, "subject": ref.subject, "version": ref.version}
                for ref in row.references
            ],
        )


def delete_schema_if_unused(conn: Connection, schema_id: int) -> bool:
    """Drop a schema no version uses any more (its id stays burnt: the counter never goes back)."""
    used = conn.execute(
        sa.select(versions_table.c.version).where(versions_table.c.schema_id == schema_id).limit(1)
    ).first()
    if used is not None:
        return False
    conn.execute(sa.delete(references_table).where(references_table.c.schema_id == schema_id))
    conn.execute(sa.delete(schemas_table).where(schemas_table.c.id == schema_id))
    return True


# --- subjects and versions -------------------------------------------------------------------------


def versions(conn: Connection, subject: str, include_deleted: bool = True) -> list[VersionRow]:
    query = _VERSIONS if include_deleted else _LIVE_VERSIONS
    return [_version_row(r) for r in conn.execute(query, {"subject": subject})]


def latest_version(conn: Connection, subject: str, include_deleted: bool = True) -> VersionRow | None:
    """The newest version of ``subject`` (live only unless ``include_deleted``): one indexed row,
    where :func:`versions` reads them all."""
    row = conn.execute(_LATEST if include_deleted else _LATEST_LIVE, {"subject": subject}).first()
    return None if row is None else _version_row(row)


def version_row(conn: Connection, subject: str, version: int) -> VersionRow | None:
    row = conn.execute(_ONE_VERSION, {"subject": subject, "version": version}).first()
    return None if row is None else _version_row(row)


def insert_version(conn: Connection, subject: str, version: int, schema_id: int) -> None:
    conn.execute(
        _INSERT_VERSION, {"subject": subject, "version": version, "schema_id": schema_id, "deleted": False}
    )


def mark_deleted(conn: Connection, subject: str, version_numbers: Sequence[int]) -> None:
    conn.execute(
        sa.update(versions_table)
        .where(versions_table.c.subject == subject, versions_table.c.version.in_(list(version_numbers)))
        .values(deleted=True)
    )


def remove_versions(conn: Connection, subject: str, version_numbers: Sequence[int]) -> None:
    conn.execute(
        sa.delete(versions_table).where(
            versions_table.c.subject == subject, versions_table.c.version.in_(list(version_numbers))
        )
    )


def subjects(conn: Connection, include_deleted: bool = False, prefix: str = "") -> list[str]:
    query = sa.select(versions_table.c.subject).distinct()
    if not include_deleted:
        query = query.where(versions_table.c.deleted.is_(False))
    if prefix:
        query = query.where(versions_table.c.subject.startswith(prefix, autoescape=True))
    return sorted(r.subject for r in conn.execute(query))


def all_versions(conn: Connection, include_deleted: bool = False, prefix: str = "") -> list[VersionRow]:
    query = sa.select(versions_table)
    if not include_deleted:
        query = query.where(versions_table.c.deleted.is_(False))
    if prefix:
        query = query.where(versions_table.c.subject.startswith(prefix, autoescape=True))
    query = query.order_by(versions_table.c.subject, versions_table.c.version)
    return [_version_row(r) for r in conn.execute(query)]


def _version_match(include_deleted: bool, any_contract: bool) -> Any:
    """The statement behind :func:`version_with_fingerprint`, built once per variant: the candidate
    schemas come from the fingerprint indexes, then their versions in ``subject``, so the cost does
    not grow with the number of versions a subject has."""
    key = (include_deleted, any_contract)
    query = _VERSION_MATCH.get(key)
    if query is not None:
        return query
    matches = schemas_table.c.fingerprint == sa.bindparam("fingerprint")
    if any_contract:
        matches = sa.or_(matches, schemas_table.c.bare_fingerprint == sa.bindparam("bare"))
    ids = sa.select(schemas_table.c.id).where(matches).scalar_subquery()
    query = (
        sa.select(versions_table)
        .join(schemas_table, schemas_table.c.id == versions_table.c.schema_id)
        # The subject is compared as an expression so that no database walks every version of the
        # subject through the primary key (SQLite, without statistics, would): the few schema ids
        # from the fingerprint indexes, then their versions by the schema_id index, is cheaper.
        .where(
            versions_table.c.schema_id.in_(ids),
            versions_table.c.subject.op("||")(sa.literal_column("''")) == sa.bindparam("subject"),
        )
    )
    if not include_deleted:
        query = query.where(versions_table.c.deleted.is_(False))
    exact = sa.case((schemas_table.c.fingerprint == sa.bindparam("fingerprint"), 0), else_=1)
    query = query.order_by(exact, versions_table.c.version.desc()).limit(1)
    _VERSION_MATCH[key] = query
    return query


_VERSION_MATCH: dict[tuple[bool, bool], Any] = {}


def version_with_fingerprint(
    conn: Connection,
    subject: str,
    fingerprint: str,
    include_deleted: bool = False,
    bare: str | None = None,
) -> VersionRow | None:
    """The newest version of ``subject`` whose schema has ``fingerprint`` (indexed queries).

    With ``bare`` (the candidate's fingerprint without a contract), a version holding that schema
    with some contract also matches, when none has the exact fingerprint: a schema looked up or
    registered without ``metadata``/``ruleSet`` is the one registered with them.
    """
    params = {"subject": subject, "fingerprint": fingerprint}
    if bare is not None:
        params["bare"] = bare
    row = conn.execute(_version_match(include_deleted, bare is not None), params).first()
    return None if row is None else _version_row(row)


def versions_of_schema(conn: Connection, schema_id: int, include_deleted: bool = False) -> list[VersionRow]:
    query = sa.select(versions_table).where(versions_table.c.schema_id == schema_id)
    if not include_deleted:
        query = query.where(versions_table.c.deleted.is_(False))
    query = query.order_by(versions_table.c.subject, versions_table.c.version)
    return [_version_row(r) for r in conn.execute(query)]


def referencing_versions(conn: Connection, subject: str, version: int) -> list[VersionRow]:
    """Every version (live or soft-deleted) whose schema references ``subject``/``version``."""
    query = (
        sa.select(versions_table)
        .join(references_table, references_table.c.schema_id == versions_table.c.schema_id)
        .where(references_table.c.subject == subject, references_table.c.version == version)
        .order_by(versions_table.c.schema_id)
    )
    return [_version_row(r) for r in conn.execute(query)]


# --- config and mode -------------------------------------------------------------------------------


_EFFECTIVE: dict[tuple[str, str], Any] = {}


@dataclass(frozen=True, slots=True)
class SubjectSetting:
    """One value per subject (and one for :data:`GLOBAL`) in ``table.column``: the compatibility level
    and the mode are both stored this way."""

    table: sa.Table
    column: str

    def get(self, conn: Connection, subject: str) -> str | None:
        query = sa.select(self.table.c[self.column]).where(self.table.c.subject == subject)
        row = conn.execute(query).first()
        return None if row is None else str(row[0])

    def effective(self, conn: Connection, subject: str) -> str | None:
        """The subject's own value, else its context's (stored under ``:.ctx:``), else the global
        one, in one query (asked on every registration and compatibility check)."""
        query = _EFFECTIVE.get((self.table.name, self.column))
        if query is None:
            query = sa.select(self.table.c.subject, self.table.c[self.column]).where(
                self.table.c.subject.in_([sa.bindparam("subject"), sa.bindparam("context"), GLOBAL])
            )
            _EFFECTIVE[(self.table.name, self.column)] = query
        context = context_of(subject)
        context_key = subject if context == DEFAULT_CONTEXT else f":{context}:"
        found = conn.execute(query, {"subject": subject, "context": context_key})
        values = {row[0]: str(row[1]) for row in found}
        return values.get(subject) or values.get(context_key) or values.get(GLOBAL)

    def put(self, conn: Connection, subject: str, value: str) -> None:
        updated = conn.execute(
            sa.update(self.table).where(self.table.c.subject == subject).values({self.column: value})
        )
        if updated.rowcount == 0:
            conn.execute(sa.insert(self.table).values({"subject": subject, self.column: value}))

    def drop(self, conn: Connection, subject: str) -> None:
        conn.execute(sa.delete(self.table).where(self.table.c.subject == subject))


compatibility = SubjectSetting(config_table, "compatibility")
modes = SubjectSetting(mode_table, "mode")


def _mode_and_level_query() -> Any:
    def part(setting: SubjectSetting, tag: str) -> Any:
        table = setting.table
        return sa.select(sa.literal(tag).label("tag"), table.c.subject, table.c[setting.column]).where(
            table.c.subject.in_([sa.bindparam("subject"), sa.bindparam("context"), GLOBAL])
        )

    return sa.union_all(part(modes, "m"), part(compatibility, "c"))


_MODE_AND_LEVEL = _mode_and_level_query()


def mode_and_level(conn: Connection, subject: str) -> tuple[str | None, str | None]:
    """The effective mode and level of ``subject`` (as :meth:`SubjectSetting.effective` answers
    each) in one query: a registration needs both."""
    context = context_of(subject)
    context_key = subject if context == DEFAULT_CONTEXT else f":{context}:"
    found: dict[tuple[str, str], str] = {}
    for tag, name, value in conn.execute(_MODE_AND_LEVEL, {"subject": subject, "context": context_key}):
        found[(str(tag), str(name))] = str(value)

    def pick(tag: str) -> str | None:
        return found.get((tag, subject)) or found.get((tag, context_key)) or found.get((tag, GLOBAL))

    return pick("m"), pick("c")
