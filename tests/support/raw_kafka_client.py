"""A minimal blocking Kafka client speaking through kio, for tests that need exact bytes on the
wire (bad frames, specific versions)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer


def encode_request(request: Any, correlation_id: int, client_id: str = "raw-test") -> bytes:
    header_type = type(request).__header_schema__
    header = header_type(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header)
    entity_writer(type(request))(buffer, request)
    body = buffer.getvalue()
    return struct.pack(">i", len(body)) + body


def recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> bytes:
    (length,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, length)


def decode_response(frame: bytes, api_key: int, api_version: int) -> tuple[int, Any]:
    response_type = load_response_schema(api_key, api_version)
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    offset = 4 + (1 if response_type.__header_schema__.__flexible__ else 0)
    body, size = entity_reader(response_type)(memoryview(frame).toreadonly(), offset)
    assert offset + size == len(frame), f"{len(frame) - offset - size} trailing bytes in the response"
    return correlation_id, body


def roundtrip(sock: socket.socket, request: Any, correlation_id: int = 1) -> Any:
    sock.sendall(encode_request(request, correlation_id))
    got_id, body = decode_response(read_frame(sock), request.__api_key__, request.__version__)
    assert got_id == correlation_id
    return body


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def is_closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True once the peer closed the connection (EOF or reset) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
