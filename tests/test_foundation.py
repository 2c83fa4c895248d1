"""The foundation: configuration precedence and parsing, metadata migrations, real servers."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tabletopic import database
from tabletopic.config import Config, ConfigError, env_name, read_properties


def test_env_name_replaces_dots_and_dashes() -> None:
    assert env_name("log.dirs") == "TABLETOPIC_LOG_DIRS"
    assert env_name("s3.access-key") == "TABLETOPIC_S3_ACCESS_KEY"


def test_properties_file_env_and_overrides_take_precedence_in_order(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# comment\nlog.level=DEBUG\nadmin.listener = http://127.0.0.1:1\n")
    cfg = Config.load(
        config_file=props,
        environ={"TABLETOPIC_ADMIN_LISTENER": "http://127.0.0.1:2"},
        overrides=["log.level=ERROR"],
    )
    assert cfg.get("log.level") == "ERROR"
    assert cfg.get("admin.listener") == "http://127.0.0.1:2"


def test_invalid_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"log\.level"):
        Config({"log.level": "LOUD"})


def test_properties_reader_handles_colons_and_continuations(tmp_path: Path) -> None:
    props = tmp_path / "p"
    props.write_text("a: 1\nb=x,\\\n  y\n! bang comment\n")
    assert read_properties(props) == {"a": "1", "b": "x,y"}


def test_override_without_equals_is_rejected() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        Config.load(overrides=["nope"], environ={})


def test_migrations_apply_once_and_resume(tmp_path: Path) -> None:
    engine = database.create_engine(database.default_url(tmp_path))
    calls: list[int] = []

    def first(conn: sa.Connection) -> None:
        calls.append(1)
        conn.exec_driver_sql("CREATE TABLE t (a INTEGER)")

    def second(conn: sa.Connection) -> None:
        calls.append(2)
        conn.exec_driver_sql("ALTER TABLE t ADD COLUMN b INTEGER")

    assert database.migrate(engine, "demo", [first]) == 1
    assert database.migrate(engine, "demo", [first, second]) == 2
    assert database.migrate(engine, "demo", [first, second]) == 2
    assert calls == [1, 2]
    with pytest.raises(RuntimeError, match="newer"):
        database.migrate(engine, "demo", [first])


def test_a_sqlite_reader_reads_beside_an_open_write_and_refuses_to_write(tmp_path: Path) -> None:
    """A writer's transaction begins IMMEDIATE (the write lock); a reader's begins DEFERRED, so it
    reads the last committed snapshot while the write is open rather than queueing behind it."""
    url = database.default_url(tmp_path)
    writer = database.create_engine(url)
    reader = database.create_engine(url, sqlite_read_only=True)
    with writer.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (a INTEGER)")
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    with writer.begin() as open_write:
        open_write.exec_driver_sql("INSERT INTO t VALUES (2)")
        with reader.begin() as conn:
            assert conn.exec_driver_sql("SELECT a FROM t").scalars().all() == [1]
    with pytest.raises(sa.exc.OperationalError, match="readonly"), reader.begin() as conn:
        conn.exec_driver_sql("INSERT INTO t VALUES (3)")


@pytest.mark.postgres
def test_migrations_run_on_postgres(postgres_url: str) -> None:
    engine = database.create_engine(postgres_url)
    table = sa.Table("things", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))
    assert database.migrate(engine, "things", [database.create_tables(table)]) == 1
    with engine.begin() as conn:
        conn.execute(sa.insert(table).values(id=1))
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 1


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_upsert_inserts_or_replaces_rows_by_their_primary_key_in_one_statement(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """One statement for every row, whatever is stored (a delete and an insert per row cost twice the
    CPU of an offset commit); ``newer`` keeps a stored row that is ahead of the new one."""
    url = database.default_url(tmp_path) if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = database.create_engine(url)
    table = sa.Table(
        f"upserted_{backend}",
        sa.MetaData(),
        sa.Column("group_id", sa.Text, primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True),
        sa.Column("offset", sa.BigInteger, nullable=False),
        sa.Column("note", sa.Text, nullable=True),
    )
    statements: list[str] = []
    try:
        with engine.begin() as conn:
            table.drop(conn, checkfirst=True)
            table.create(conn)
            database.upsert(
                conn, table, [{"group_id": "g", "partition": p, "offset": 5, "note": "a"} for p in range(3)]
            )
        sa.event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        with engine.begin() as conn:
            database.upsert(
                conn,
                table,
                [{"group_id": "g", "partition": p, "offset": 7, "note": None} for p in (1, 2, 3)],
            )
            database.upsert(conn, table, [], newer=table.c.offset)
            database.upsert(
                conn,
                table,
                [{"group_id": "g", "partition": p, "offset": o, "note": "b"} for p, o in ((0, 4), (1, 7))],
                newer=table.c.offset,
            )
            rows = conn.execute(sa.select(table).order_by(table.c.partition)).all()
        assert [tuple(r) for r in rows] == [
            ("g", 0, 5, "a"),
            ("g", 1, 7, "b"),
            ("g", 2, 7, None),
            ("g", 3, 7, None),
        ]
        verbs = [s.split()[0].upper() for s in statements]
        assert verbs.count("INSERT") == 2 and "DELETE" not in verbs, statements
    finally:
        engine.dispose()


@pytest.mark.s3
def test_seaweedfs_serves_the_bucket(s3_settings: dict[str, str]) -> None:
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=s3_settings["s3.endpoint"],
        aws_access_key_id=s3_settings["s3.access.key"],
        aws_secret_access_key=s3_settings["s3.secret.key"],
        region_name="us-east-1",
    )
    key = s3_settings["s3.prefix"] + "hello"
    client.put_object(Bucket=s3_settings["s3.bucket"], Key=key, Body=b"world")
    assert client.get_object(Bucket=s3_settings["s3.bucket"], Key=key)["Body"].read() == b"world"


MIGRATE_SCRIPT = """
import sys, time
import sqlalchemy as sa
from tabletopic import database

def slow_create(conn):
    time.sleep(0.5)  # the subject: a slow migration step, so the two processes race
    conn.exec_driver_sql("CREATE TABLE raced (a INTEGER)")

engine = database.create_engine(sys.argv[1])
print(database.migrate(engine, "raced", [slow_create]))
"""


@pytest.mark.postgres
def test_two_nodes_migrating_one_postgres_database_at_once_both_start(postgres_url: str) -> None:
    import subprocess
    import sys

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATE_SCRIPT, postgres_url], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == ["1", "1"]
