"""A minimal blocking Kafka client over the broker's own codec: the CLI's requests that the
confluent-kafka admin client does not offer (AlterPartitionReassignments), and the broker's own
requests to other brokers (WriteTxnMarkers, last-stable-offset queries), which connect through
``connect`` (TLS and SASL on a secured inter-broker listener) and keep their connections in a
:class:`ConnectionPool`."""

from __future__ import annotations

import io
import itertools
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from tabletopic.broker.protocol import build_entity

# Opens a connection ready for requests: (host, port, timeout in seconds) -> socket.
Connect = Callable[[str, int, float], socket.socket]


# The largest answer read (Kafka's own socket.request.max.bytes default): a size beyond it means the
# other side does not speak Kafka here, and reading it would allocate that much.
MAX_ANSWER_BYTES = 100 * 1024 * 1024


class WireError(Exception):
    """The broker could not be reached or answered something unreadable."""


def bootstrap_servers(bootstrap: str) -> Iterator[tuple[str, str, int]]:
    """Each ``host:port`` of a ``bootstrap.servers`` list, in order, as (the entry as written, host,
    port): an IPv6 host loses its brackets, and an entry without a numeric port is skipped (the
    Kafka client names it when it parses the same list)."""
    for entry in (part.strip() for part in bootstrap.split(",")):
        host, _, port = entry.rpartition(":")
        if port.isdigit():
            yield entry, host.strip("[]"), int(port)


def plain_connect(host: str, port: int, timeout: float) -> socket.socket:
    return socket.create_connection((host, port), timeout=timeout)


def exchange(sock: socket.socket, api_key: int, version: int, correlation_id: int = 1, **fields: Any) -> Any:
    """Send one request built from newest-shaped ``fields`` on an open connection and return the
    decoded response body.

    Raises:
        ConnectionError: the connection closed, or the answer is not this request's (its
            correlation id differs): the connection is no longer usable.
    """
    request = build_entity(load_request_schema(api_key, version), fields)
    header_type = type(request).__header_schema__
    header = header_type(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="tabletopic",
    )
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header)
    entity_writer(type(request))(buffer, request)
    body = buffer.getvalue()
    sock.sendall(struct.pack(">i", len(body)) + body)
    (length,) = struct.unpack(">i", _read(sock, 4))
    if length > MAX_ANSWER_BYTES:  # a TLS alert read as a size is 0x15030300: not a Kafka answer
        raise ConnectionError(f"an answer of {length} bytes is not a Kafka response")
    frame = _read(sock, length)
    if length < 4 or struct.unpack_from(">i", frame)[0] != correlation_id:
        raise ConnectionError(f"answer to another request than correlation id {correlation_id}")
    response_type = load_response_schema(api_key, version)
    offset = 4 + (1 if response_type.__header_schema__.__flexible__ else 0)
    decoded, _ = entity_reader(response_type)(memoryview(frame).toreadonly(), offset)
    return decoded


def call(
    bootstrap: str,
    api_key: int,
    version: int,
    timeout: float = 10.0,
    connect: Connect = plain_connect,
    **fields: Any,
) -> Any:
    """Send one request to the first reachable server of ``bootstrap`` on a connection of its own
    and return the decoded response body (:meth:`ConnectionPool.call_first` for several).

    Raises:
        WireError: no server of ``bootstrap`` could be reached.
    """
    pool = ConnectionPool(connect)
    try:
        return pool.call_first(bootstrap, api_key, version, timeout, **fields)
    finally:
        pool.close()


class ConnectionPool:
    """One kept connection per peer, for a process that asks the same few brokers again and again
    (a login over TLS and SASL costs more round trips than the request).

    A call takes the peer's idle connection, or opens one when there is none or it is busy (a
    concurrent call never waits for another's answer); afterwards the connection is kept unless the
    peer already has one. A connection that fails is closed, never kept; when a kept one fails
    with the peer gone (it restarted, or closed an idle connection), the call is made once more on
    a new connection, so a stale connection alone is never an error. Thread-safe: calls run in
    worker threads.

    Args:
        connect: opens a connection ready for requests.
    """

    def __init__(self, connect: Connect = plain_connect) -> None:
        self._connect = connect
        self._idle: dict[str, socket.socket] = {}  # "host:port" -> its kept connection
        self._lock = threading.Lock()
        self._closed = False
        self._correlation = itertools.count(1)

    def call(self, address: str, api_key: int, version: int, timeout: float, **fields: Any) -> Any:
        """One request to ``address`` (``host:port``); ``timeout`` bounds each socket operation.

        Raises:
            OSError: the peer could not be reached or the exchange failed on a new connection.
            ValueError: the answer could not be decoded.
        """
        with self._lock:
            sock = self._idle.pop(address, None)
        if sock is not None:
            try:
                return self._exchange(address, sock, api_key, version, timeout, fields)
            except ConnectionError:
                pass  # stale: the peer closed it; once more on a new connection
        host, _, port = address.rpartition(":")
        sock = self._connect(host.strip("[]"), int(port), timeout)
        return self._exchange(address, sock, api_key, version, timeout, fields)

    def call_first(self, bootstrap: str, api_key: int, version: int, timeout: float, **fields: Any) -> Any:
        """One request to the first server of ``bootstrap`` (a ``bootstrap.servers`` list) that can
        be reached, on its kept connection: a command that asks again and again (``partitions move``
        waiting for the new leader) logs in once, not once a question.

        Raises:
            WireError: no server of ``bootstrap`` could be reached.
            ValueError: the answer could not be decoded.
        """
        last: Exception | None = None
        for server, _, _ in bootstrap_servers(bootstrap):
            try:
                return self.call(server, api_key, version, timeout, **fields)
            except OSError as exc:
                last = exc
        raise WireError(f"no broker of {bootstrap} answered: {last}")

    def _exchange(
        self,
        address: str,
        sock: socket.socket,
        api_key: int,
        version: int,
        timeout: float,
        fields: dict[str, Any],
    ) -> Any:
        try:
            sock.settimeout(timeout)
            answer = exchange(sock, api_key, version, next(self._correlation) & 0x7FFFFFFF, **fields)
        except BaseException:
            sock.close()
            raise
        with self._lock:
            keep = not self._closed and address not in self._idle
            if keep:
                self._idle[address] = sock
        if not keep:
            sock.close()
        return answer

    def close(self) -> None:
        """Close the kept connections; later calls still work but keep nothing."""
        with self._lock:
            self._closed = True
            kept, self._idle = list(self._idle.values()), {}
        for sock in kept:
            sock.close()


def _read(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        data += chunk
    return bytes(data)
