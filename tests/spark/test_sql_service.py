"""The node's ``/v1/sql`` endpoint (a fake Spark session, real DuckDB): each statement runs in a new
session of the node's Spark, rows stream back as NDJSON after the column names, a refused statement
is a 400 in Spark's words, and a failure while rows stream is the last line; DuckDB statements (and
fresh reads) run in a DuckDB session of their own, closed once the rows are out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tabletopic.spark.sql_service import sql_router

pytestmark = pytest.mark.timeout(60)


class FakeFrame:
    def __init__(self, columns: list[str], rows: list[tuple[Any, ...]], fail_at: int | None = None) -> None:
        self.columns, self.rows, self.fail_at = columns, rows, fail_at

    def limit(self, n: int) -> FakeFrame:
        return FakeFrame(self.columns, self.rows[:n], self.fail_at)

    def collect(self) -> list[tuple[Any, ...]]:
        return list(self.toLocalIterator())

    def toLocalIterator(self) -> Any:
        for index, row in enumerate(self.rows):
            if index == self.fail_at:
                raise RuntimeError("executor lost\n\tat org.apache.spark.Something")
            yield row


class FakeSession:
    def __init__(self, frames: dict[str, FakeFrame], sessions: list[FakeSession]) -> None:
        self.frames, self.sessions = frames, sessions

    def newSession(self) -> FakeSession:
        session = FakeSession(self.frames, self.sessions)
        self.sessions.append(session)
        return session

    def sql(self, statement: str) -> FakeFrame:
        if statement not in self.frames:
            raise ValueError(f"[TABLE_OR_VIEW_NOT_FOUND] {statement}\nJVM stacktrace:\n\tat x")
        return self.frames[statement]


class DuckOverNothing:
    """A DuckDB connection with no catalog behind it (what the endpoint does with it is the test)."""

    opened: list[tuple[bool, DuckOverNothing]] = []

    def __init__(self, fresh: bool) -> None:
        import duckdb

        self.con, self.closed = duckdb.connect(), False
        DuckOverNothing.opened.append((fresh, self))

    def execute(self, statement: str) -> tuple[list[str], Any]:
        cursor = self.con.execute(statement)
        return [str(d[0]) for d in cursor.description], iter(cursor.fetchall())

    def close(self) -> None:
        self.closed = True
        self.con.close()


def client(frames: dict[str, FakeFrame], spark: bool = True) -> tuple[TestClient, list[FakeSession]]:
    sessions: list[FakeSession] = []
    node_session = FakeSession(frames, sessions)
    app = FastAPI()
    app.include_router(sql_router((lambda: node_session) if spark else None, DuckOverNothing))  # type: ignore[arg-type]
    return TestClient(app), sessions


def test_duckdb_statements_run_in_a_session_of_their_own_closed_after_the_rows() -> None:
    http, sessions = client({}, spark=False)
    DuckOverNothing.opened.clear()
    body = {"statement": "SELECT * FROM range(5) t(n)", "engine": "duckdb", "limit": 3}
    assert lines(http.post("/v1/sql", json=body)) == [{"columns": ["n"]}, [0], [1], [2]]
    fresh = http.post("/v1/sql", json={"statement": "SELECT 1 AS one", "fresh": True})
    assert lines(fresh) == [{"columns": ["one"]}, [1]]
    assert [(f, d.closed) for f, d in DuckOverNothing.opened] == [(False, True), (True, True)]
    refused = http.post("/v1/sql", json={"statement": "SELECT nope", "engine": "duckdb"})
    assert refused.status_code == 400 and "nope" in refused.json()["detail"]
    assert DuckOverNothing.opened[-1][1].closed
    no_spark = http.post("/v1/sql", json={"statement": "SELECT 1"})
    assert no_spark.status_code == 400 and "duckdb" in no_spark.json()["detail"]
    assert http.get("/v1/sql").json()["engines"] == ["duckdb"] and not sessions


def lines(response: Any) -> list[Any]:
    return [json.loads(line) for line in response.text.splitlines()]


def test_rows_stream_after_the_column_names_each_statement_in_a_new_session() -> None:
    frames = {"SELECT 1": FakeFrame(["a", "b"], [(1, b"\x00"), (2, None), (3, "x")])}
    http, sessions = client(frames)
    answer = http.post("/v1/sql", json={"statement": "SELECT 1", "limit": 2})
    assert answer.status_code == 200
    assert lines(answer) == [{"columns": ["a", "b"]}, [1, "AA=="], [2, None]]
    assert lines(http.post("/v1/sql", json={"statement": "SELECT 1"}))[1:] == [
        [1, "AA=="],
        [2, None],
        [3, "x"],
    ]
    assert len(sessions) == 2
    assert http.get("/v1/sql").json()["engine"] == "spark"


def test_a_refused_statement_is_a_400_with_sparks_message_without_the_jvm_trace() -> None:
    http, _ = client({})
    answer = http.post("/v1/sql", json={"statement": "SELECT * FROM nowhere"})
    assert answer.status_code == 400
    assert answer.json()["detail"].startswith("[TABLE_OR_VIEW_NOT_FOUND]")
    assert "JVM" not in answer.json()["detail"]


def test_a_failure_while_rows_stream_is_the_last_line() -> None:
    http, _ = client({"SELECT 2": FakeFrame(["a"], [(1,), (2,), (3,)], fail_at=1)})
    got = lines(http.post("/v1/sql", json={"statement": "SELECT 2"}))
    assert got[:2] == [{"columns": ["a"]}, [1]]
    assert got[-1] == {"error": "executor lost"}
