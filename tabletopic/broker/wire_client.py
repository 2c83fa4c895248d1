"""A minimal blocking Kafka client over the broker's own codec: the CLI's requests that the
confluent-kafka admin client does not offer (AlterPartitionReassignments), and the broker's own
requests to other brokers (WriteTxnMarkers), which connect through ``connect`` (TLS and SASL on a
secured inter-broker listener)."""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from tabletopic.broker.protocol import build_entity

# Opens a connection ready for requests: (host, port, timeout in seconds) -> socket.
Connect = Callable[[str, int, float], socket.socket]


class WireError(Exception):
    """The broker could not be reached or answered something unreadable."""


def plain_connect(host: str, port: int, timeout: float) -> socket.socket:
    return socket.create_connection((host, port), timeout=timeout)


def exchange(sock: socket.socket, api_key: int, version: int, **fields: Any) -> Any:
    """Send one request built from newest-shaped ``fields`` on an open connection and return the
    decoded response body."""
    request = build_entity(load_request_schema(api_key, version), fields)
    header_type = type(request).__header_schema__
    header = header_type(
        request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="tabletopic"
    )
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header)
    entity_writer(type(request))(buffer, request)
    body = buffer.getvalue()
    sock.sendall(struct.pack(">i", len(body)) + body)
    (length,) = struct.unpack(">i", _read(sock, 4))
    frame = _read(sock, length)
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
    """Send one request to the first reachable server of ``bootstrap`` and return the decoded
    response body."""
    last: Exception | None = None
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with connect(host, int(port), timeout) as sock:
                return exchange(sock, api_key, version, **fields)
        except OSError as exc:
            last = exc
    raise WireError(f"no broker of {bootstrap} answered: {last}")


def _read(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        data += chunk
    return bytes(data)
