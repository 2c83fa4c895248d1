"""The CLI's plaintext check of a listener given with ``-b``, against sockets that play the three
cases: a listener that closes the connection (SASL, or TLS after its alert), one that accepts and
never answers (a stopped broker: SIGSTOP), and a list of servers as users write it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import typer

from tabletopic.broker.security import client_login
from tabletopic.broker.wire_client import bootstrap_servers


def test_bootstrap_servers_are_read_as_the_kafka_client_reads_them() -> None:
    listed = list(bootstrap_servers(" a:1, [::1]:2,no-port,b:x ,c:3"))
    assert listed == [("a:1", "a", 1), ("[::1]:2", "::1", 2), ("c:3", "c", 3)]


@pytest.fixture
def silent() -> Iterator[str]:
    """A listener the kernel accepts connections for and nobody reads: a stopped broker."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def closing() -> Iterator[str]:
    """A listener that closes each connection unanswered, as a SASL listener does before a login."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(4096)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_a_server_that_does_not_answer_is_left_to_the_kafka_client(
    silent: str, closing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped first broker says nothing of its listener: the check goes on to the next server,
    and a list of silent ones is left to librdkafka (it was refused as 'may want TLS or a SASL
    login', so a command given the whole cluster failed while one broker was paused)."""
    monkeypatch.setattr(client_login, "LOGIN_CHECK_TIMEOUT_S", 0.3)
    client_login.require_plaintext({"bootstrap.servers": silent})
    with pytest.raises(typer.Exit):
        client_login.require_plaintext({"bootstrap.servers": f"{silent},{closing}"})


def test_a_listener_that_closes_the_connection_is_named(
    closing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit):
        client_login.require_plaintext({"bootstrap.servers": closing})
    assert "may want TLS or a SASL login" in capsys.readouterr().err
