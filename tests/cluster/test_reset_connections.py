"""The "connections reset" fault of the fault tests and runs (``LocalCluster.reset_connections``)
really breaks the connections it names, or says it cannot: a test under that fault must never pass
without it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

import tests.support.cluster as cluster_support
from tests.support.cluster import ConnectionResetUnavailable, LocalCluster


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    yield server
    server.close()


def _brokers_on(port: int) -> SimpleNamespace:
    """What reset_connections reads of a cluster: its brokers' listener ports."""
    return SimpleNamespace(brokers={1: SimpleNamespace(kafka_port=port, sasl_port=0)})


def test_every_connection_to_a_listener_is_reset(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
    accepted = [listener.accept()[0] for _ in clients]
    try:
        try:
            reset = LocalCluster.reset_connections(_brokers_on(port))  # type: ignore[arg-type]
        except ConnectionResetUnavailable as exc:
            pytest.skip(f"cannot reset connections here: {exc}")
        assert reset == 3
        for client in clients:
            with pytest.raises(ConnectionResetError):
                client.recv(1)
    finally:
        for sock in clients + accepted:
            sock.close()


def test_connections_listed_but_not_destroyed_are_refused_not_counted(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel without socket destroy: ``ss --kill`` lists the connections and leaves them up."""
    still_up = {("127.0.0.1:9092", "127.0.0.1:40000")}
    monkeypatch.setattr(cluster_support, "_established", lambda sport, kill: still_up)
    with pytest.raises(ConnectionResetUnavailable, match="still established"):
        LocalCluster.reset_connections(_brokers_on(listener.getsockname()[1]))  # type: ignore[arg-type]
