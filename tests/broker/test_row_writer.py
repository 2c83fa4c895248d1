"""The transaction coordinator's row writer: writes in call order on one thread and one kept
connection, errors handed to the caller, a connection dropped after a database error."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tabletopic import database
from tabletopic.broker.transactions.row_writer import RowWriter

rows = sa.Table("rows", sa.MetaData(), sa.Column("n", sa.Integer, primary_key=True))


async def test_writes_run_in_order_on_one_thread_and_connection(tmp_path: Path) -> None:
    engine = database.create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    rows.metadata.create_all(engine)
    writer = RowWriter(engine, "rows-writer")
    seen: list[tuple[str, int]] = []

    def insert(n: int):  # type: ignore[no-untyped-def]
        def write(conn: Connection) -> int:
            seen.append((threading.current_thread().name, id(conn.connection.dbapi_connection)))
            conn.execute(sa.insert(rows).values(n=n))
            return n

        return write

    assert await asyncio.gather(*(writer.run(insert(n)) for n in range(20))) == list(range(20))
    assert len(set(seen)) == 1 and seen[0][0] == "rows-writer"
    await writer.close()
    with engine.connect() as conn:
        assert [r.n for r in conn.execute(sa.select(rows).order_by(rows.c.n))] == list(range(20))
    with pytest.raises(RuntimeError, match="writer closed"):
        await writer.run(insert(99))


async def test_an_error_rolls_back_reaches_the_caller_and_a_database_error_drops_the_connection(
    tmp_path: Path,
) -> None:
    engine = database.create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    rows.metadata.create_all(engine)
    writer = RowWriter(engine, "rows-writer")
    connections: list[Connection] = []  # kept, so no two can share an address

    def failing(conn: Connection) -> None:
        connections.append(conn)
        conn.execute(sa.insert(rows).values(n=1))
        raise ValueError("refused by the caller's own check")

    with pytest.raises(ValueError, match="own check"):
        await writer.run(failing)

    def duplicate(conn: Connection) -> None:
        connections.append(conn)
        conn.execute(sa.insert(rows).values(n=2))
        conn.execute(sa.insert(rows).values(n=2))  # the primary key refuses it: a database error

    with pytest.raises(sa.exc.IntegrityError):
        await writer.run(duplicate)

    def count(conn: Connection) -> int:
        connections.append(conn)
        return int(conn.execute(sa.select(sa.func.count()).select_from(rows)).scalar_one())

    assert await writer.run(count) == 0  # both rolled back
    # The connection survived the caller's error and was replaced after the database's.
    assert connections[0] is connections[1] and connections[2] is not connections[1]
    await writer.close()
