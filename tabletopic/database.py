"""The metadata database shared by every subsystem: SQLite by default, PostgreSQL by URL.

One SQLAlchemy Core engine per process. Each subsystem owns its tables and an ordered list of
migrations; :func:`migrate` applies the ones a database has not seen yet, recording them in
``schema_migrations`` so that later releases can change a schema in place on first start.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import sqlalchemy as sa
import sqlalchemy.orm
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

log = logging.getLogger(__name__)

# Imported here, once, on the importing thread: SQLAlchemy imports its ORM lazily on first use, and
# a broker's database threads racing the catalog's start-up could then see it half-initialised.
_ORM = sqlalchemy.orm

Migration = Callable[[Connection], None]

_migrations_table = sa.Table(
    "schema_migrations",
    sa.MetaData(),
    sa.Column("component", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
)

_migrate_lock = threading.Lock()


def default_url(data_dir: Path) -> str:
    return f"sqlite:///{(data_dir / 'metadata.db').resolve()}"


def create_engine(
    url: str,
    *,
    sqlite_synchronous: str = "FULL",
    sqlite_read_only: bool = False,
    idle_transaction_timeout_ms: int | None = None,
) -> Engine:
    """Create the engine with the settings each backend needs to be safe under concurrent use.

    SQLite: WAL journal so readers never block the writer, a busy timeout instead of immediate
    "database is locked" errors, and ``synchronous=FULL`` because an object-WAL index commit is an
    acknowledgement to a producer and must survive a power cut, not only a process kill.
    ``sqlite_synchronous="NORMAL"`` is for a writer that accepts losing its last commits to a power
    cut (never to a process kill) in exchange for no fsync per commit. A writable engine begins every
    transaction IMMEDIATE (taking the write lock) so two writers never deadlock upgrading read locks;
    ``sqlite_read_only=True`` is for reads alone (``PRAGMA query_only``), whose transactions begin
    DEFERRED: in WAL mode such a transaction sees one consistent snapshot without blocking anyone.

    PostgreSQL: ``idle_transaction_timeout_ms`` makes the server end a session that sits inside a
    transaction that long without a statement (``idle_in_transaction_session_timeout``). A broker
    paused or cut off mid-transaction otherwise keeps its row locks for as long as its TCP
    connection lives, and a lock on the controller row stops every other broker from taking the
    controller over (no partition of a dead broker would move).
    """
    if url.startswith("sqlite"):
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_pre_ping=False,
        )

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA synchronous={'NORMAL' if sqlite_synchronous == 'NORMAL' else 'FULL'}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            if sqlite_read_only:
                cursor.execute("PRAGMA query_only=ON")
            cursor.close()
            # SQLAlchemy's BEGIN is ours: IMMEDIATE for a writer, DEFERRED for a reader (above).
            dbapi_conn.isolation_level = None

        begin = "BEGIN" if sqlite_read_only else "BEGIN IMMEDIATE"

        @sa.event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # type: ignore[no-untyped-def]
            conn.exec_driver_sql(begin)

        return engine
    if url.startswith("postgresql://"):
        # Default to psycopg 3, the driver we install.
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    connect_args = {}
    if idle_transaction_timeout_ms:
        connect_args["options"] = f"-c idle_in_transaction_session_timeout={int(idle_transaction_timeout_ms)}"
    return sa.create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args=connect_args)


def schema_version(engine: Engine, component: str) -> int:
    """The schema version of ``component`` the database holds (0: never migrated). A reader that
    is not the one to migrate (a CLI beside running brokers) checks it before it reads tables a
    release it does not match may shape otherwise."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(_migrations_table.name):
            return 0
        row = conn.execute(
            sa.select(_migrations_table.c.version).where(_migrations_table.c.component == component)
        ).first()
    return int(row[0]) if row else 0


def migrate(engine: Engine, component: str, migrations: Sequence[Migration]) -> int:
    """Apply the migrations of ``component`` not yet recorded; return the resulting version.

    Runs in one transaction per migration, so an interrupted start leaves the database at the last
    fully applied version and the next start resumes there.
    """
    with _migrate_lock, _database_lock(engine):
        _migrations_table.create(engine, checkfirst=True)
        current = schema_version(engine, component)
        if current > len(migrations):
            raise RuntimeError(
                f"metadata database has {component} schema version {current}, newer than this "
                f"release knows ({len(migrations)}); upgrade tabletopic"
            )
        for version in range(current + 1, len(migrations) + 1):
            with engine.begin() as conn:
                migrations[version - 1](conn)
                if version == 1 and current == 0:
                    conn.execute(sa.insert(_migrations_table).values(component=component, version=1))
                else:
                    conn.execute(
                        sa.update(_migrations_table)
                        .where(_migrations_table.c.component == component)
                        .values(version=version)
                    )
            # DEBUG: a fresh database runs a dozen of these, which would bury a one-line start-up error.
            log.debug("metadata schema of %s migrated to version %d", component, version)
        return len(migrations)


@contextlib.contextmanager
def _database_lock(engine: Engine) -> Iterator[None]:
    """Serialise migrations across processes: two nodes starting at once on an empty PostgreSQL
    database must not both create the same tables. (SQLite's BEGIN IMMEDIATE already serialises
    writers, and its DDL is transactional.)"""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT pg_advisory_lock(727001)")
        conn.commit()
        try:
            yield
        finally:
            conn.exec_driver_sql("SELECT pg_advisory_unlock(727001)")
            conn.commit()


def driver_message(exc: sa.exc.DBAPIError) -> str:
    """What the database driver said, without the statement and parameters SQLAlchemy adds: for a
    client told why a value was refused (``value too long for type character varying(255)``), who
    need not see the SQL."""
    return str(exc.orig).strip() or type(exc.orig).__name__


# What SQLAlchemy raises while the database cannot be reached (restarting, down, the network): the
# statement did not run or its outcome is unknown. ``InvalidatePoolError`` escapes a pool checkout
# that meets connections the outage invalidated.
UNREACHABLE = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.InvalidatePoolError)


def unreachable_message(exc: BaseException) -> str:
    """One line on why the database could not be reached, for a log line in place of a traceback."""
    if isinstance(exc, sa.exc.DBAPIError):
        return driver_message(exc).splitlines()[0]
    return type(exc).__name__


class Utf8Bytes(sa.types.TypeDecorator[str]):
    """A string stored as its UTF-8 bytes (BLOB on SQLite, bytea on PostgreSQL), so it comes back
    byte-exact whatever it holds: PostgreSQL's text types refuse a NUL character, and Kafka strings
    such as an offset's commit metadata may carry one. Lone surrogates pass through as well."""

    impl = sa.LargeBinary
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: sa.Dialect) -> bytes | None:
        return None if value is None else value.encode("utf-8", "surrogatepass")

    def process_result_value(self, value: bytes | None, dialect: sa.Dialect) -> str | None:
        return None if value is None else bytes(value).decode("utf-8", "surrogatepass")


def text_to_utf8_bytes(table: str, keys: Sequence[str], old: str, new: str) -> Migration:
    """A migration that adds the :class:`Utf8Bytes` column ``new`` to ``table`` (unless the table was
    created with it) and fills it from the text column ``old``, row by row on ``keys`` (the
    primary key). ``old`` stays in place, unused: SQLite before 3.35 cannot drop a column."""

    def run(conn: Connection) -> None:
        columns = {c["name"] for c in sa.inspect(conn).get_columns(table)}
        if new not in columns:
            kind = sa.LargeBinary().compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {new} {kind}")
        if old not in columns:
            return
        quoted = [conn.dialect.identifier_preparer.quote(k) for k in keys]
        rows = conn.execute(
            sa.text(f"SELECT {', '.join(quoted)}, {old} FROM {table} WHERE {old} IS NOT NULL")
        ).all()
        where = " AND ".join(f"{q} = :k{i}" for i, q in enumerate(quoted))
        update = sa.text(f"UPDATE {table} SET {new} = :value WHERE {where}").bindparams(
            sa.bindparam("value", type_=Utf8Bytes())
        )
        for row in rows:
            conn.execute(update, {"value": row[-1], **{f"k{i}": v for i, v in enumerate(row[:-1])}})

    return run


def insert_missing(conn: Connection, table: sa.Table, key: sa.Column[int], row: dict[str, object]) -> None:
    """Insert ``row`` unless a row of its ``key`` exists (INSERT ... ON CONFLICT DO NOTHING, on
    PostgreSQL and SQLite alike): brokers that start together and each create a singleton row
    must not fail on the primary key, which the one that loses a check-then-insert race does."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    conn.execute(insert(table).values(**row).on_conflict_do_nothing(index_elements=[key]))


def upsert(
    conn: Connection,
    table: sa.Table,
    rows: Sequence[dict[str, object]],
    *,
    newer: sa.Column[int] | None = None,
) -> None:
    """Insert ``rows``, or replace every other column of the stored row with the same primary key,
    in one statement (INSERT ... ON CONFLICT DO UPDATE, on PostgreSQL and SQLite alike). With
    ``newer``, a row replaces the stored one only where its value in that column is not below the
    stored one's.

    Why one statement: delete-then-insert costs a statement per row twice (a 1,200-partition
    offset commit took about twice the CPU), and two writers of one key can both delete nothing and
    both insert, so the second fails on the primary key."""
    if not rows:
        return
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = insert(table)
    keys = list(table.primary_key.columns)
    replaced = {c.name: statement.excluded[c.name] for c in table.columns if c not in keys}
    where = None if newer is None else newer <= statement.excluded[newer.name]
    conn.execute(statement.on_conflict_do_update(index_elements=keys, set_=replaced, where=where), list(rows))


def create_tables(*tables: sa.Table) -> Migration:
    """A migration that creates the given tables (and their indexes)."""

    def run(conn: Connection) -> None:
        for table in tables:
            table.create(conn, checkfirst=True)

    return run
