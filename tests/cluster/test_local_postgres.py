"""The PostgreSQL that ``tabletopic cluster up``, the benches and the test session start is ready
when ``start`` returns: a server that listens but still answers "the database system is starting
up" (replaying its WAL after a restart) must not be handed to the first client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.support.postgres import PostgresServer, postgres_bin_dir

pytestmark = pytest.mark.skipif(postgres_bin_dir() is None, reason="PostgreSQL server not installed")


def test_start_returns_only_once_the_server_takes_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect: Callable[..., Any] = psycopg.connect
    refusals = {"left": 3}

    def connect_while_starting_up(*args: Any, **kwargs: Any) -> Any:
        if refusals["left"] > 0:
            refusals["left"] -= 1
            raise psycopg.OperationalError("FATAL:  the database system is starting up")
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", connect_while_starting_up)
    server = PostgresServer().start()  # a directory the postgres user can reach
    try:
        assert refusals["left"] == 0  # start itself met every refusal
        url = server.create_database("first_client")  # the first client is not refused
        assert url.endswith("/first_client")
    finally:
        server.stop()
