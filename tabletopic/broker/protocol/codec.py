"""Request parsing and response encoding on top of kio, without any I/O.

A *frame* is one Kafka message without its 4-byte length prefix. :func:`parse_request` turns a frame
into a :class:`Request` (header fields plus the kio request object of the version the client sent);
:func:`encode_response` turns a kio response object into the bytes to send, length prefix included.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from tabletopic.broker.protocol.builder import build_response, response_class
from tabletopic.broker.protocol.errors import MalformedFrame, UnsupportedRequest
from tabletopic.broker.protocol.guard import check_lengths
from tabletopic.broker.protocol.produce_reader import PRODUCE, read_produce_body
from tabletopic.broker.protocol.produce_reader import VERSIONS as PRODUCE_VERSIONS

_HEADER_PREFIX = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")
_RESPONSE_HEADER = struct.Struct(">ii")
API_VERSIONS_KEY = 18


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed request."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kio request object


@dataclass(frozen=True, slots=True)
class WireResponse:
    """A response a handler encoded itself (zero-copy paths): the complete wire form, length prefix
    included, as buffers for ``transport.writelines``."""

    buffers: list[Any]


@cache
def _request_readers(api_key: int, api_version: int) -> tuple[Callable[..., Any], Callable[..., Any], Any]:
    request_type = load_request_schema(api_key, api_version)
    return entity_reader(request_type.__header_schema__), entity_reader(request_type), request_type


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` of a frame, read without parsing the rest."""
    if len(frame) < _HEADER_PREFIX.size:
        raise MalformedFrame(f"frame of {len(frame)} bytes is shorter than a request header")
    return _HEADER_PREFIX.unpack_from(frame, 0)


def parse_request(
    frame: bytes | memoryview, supported: dict[int, int] | None = None, lend: bool = False
) -> Request:
    """Parse a request frame.

    Args:
        frame: the message without its length prefix.
        supported: ``api_key -> max version`` served; None accepts whatever kio knows.
        lend: the frame's buffer is never written again, so a Produce request's records may be
            views into it instead of copies (see produce_reader).

    Raises:
        UnsupportedRequest: unknown API key or a version outside what we serve.
        MalformedFrame: the bytes do not parse as that request.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    if supported is not None:
        maximum = supported.get(api_key)
        if maximum is None:
            raise UnsupportedRequest(f"API key {api_key} is not served", api_key, api_version, correlation_id)
        if api_version > maximum:
            raise UnsupportedRequest(
                f"API key {api_key} version {api_version} is above {maximum}",
                api_key,
                api_version,
                correlation_id,
            )
    try:
        read_header, read_body, request_type = _request_readers(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity) as exc:
        raise UnsupportedRequest(str(exc), api_key, api_version, correlation_id) from exc
    view = frame.toreadonly() if isinstance(frame, memoryview) else memoryview(frame)
    try:
        header, header_size = read_header(view, 0)
        if api_key == PRODUCE and api_version in PRODUCE_VERSIONS:
            body = read_produce_body(view, header_size, api_version, lend)
        else:
            # kio's native reader reserves array memory from the declared count: check counts first.
            check_lengths(request_type, view, header_size)
            body, _body_size = read_body(view, header_size)
    except MalformedFrame:
        raise
    except Exception as exc:  # kio raises a zoo of errors (ValueError, UnicodeError, OverflowError...)
        raise MalformedFrame(
            f"cannot parse API key {api_key} v{api_version}: {type(exc).__name__}: {exc}"
        ) from exc
    return Request(api_key, api_version, correlation_id, header.client_id, body)


@cache
def _writer(response_type: Any) -> Callable[..., None]:
    return entity_writer(response_type)


@cache
def _has_tagged_header(response_type: Any) -> bool:
    return bool(response_type.__header_schema__.__flexible__)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The full wire bytes (length prefix, response header, body) of one kio response object."""
    response_type: Any = type(response)
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    buffer.write(_INT32.pack(correlation_id))
    if _has_tagged_header(response_type):
        buffer.write(b"\0")  # empty tagged-fields section of response header v1
    _writer(response_type)(buffer, response)
    data = buffer.getbuffer()
    _INT32.pack_into(data, 0, len(data) - 4)
    del data
    return buffer.getvalue()


def encode_api_versions_fallback(
    correlation_id: int, api_ranges: list[tuple[int, int, int]], error: ErrorCode
) -> bytes:
    """An ApiVersions v0 response (KIP-511): what a client that sent a version above ours expects,
    so it can retry with one we list."""
    body = bytearray(struct.pack(">hi", int(error), len(api_ranges)))
    for key, low, high in api_ranges:
        body += struct.pack(">hhh", key, low, high)
    return _RESPONSE_HEADER.pack(len(body) + 4, correlation_id) + bytes(body)


def encode_unsupported_version(frame: bytes | memoryview, maximum: int) -> bytes | None:
    """The answer to a request of an API we serve at a version above ``maximum``, in that version's
    own response: UNSUPPORTED_VERSION (see :func:`encode_refusal`). The client gets a well-formed
    refusal instead of a closed socket.

    Raises:
        UnsupportedRequest: kio has no schema for that version, so no response can be encoded
            (the caller closes the connection, as Kafka does for every unsupported version).
        MalformedFrame: the bytes do not parse as that version's request.
    """
    request = parse_request(frame)
    message = f"version {request.api_version} is not supported (at most {maximum})"
    return encode_refusal(request, ErrorCode.unsupported_version, message)


def encode_refusal(request: Request, error: ErrorCode, message: str) -> bytes | None:
    """``request`` refused as a whole in its version's own response: ``error`` as the top-level
    error code, with ``message`` where the version has a top-level message; a response without a
    top-level error code goes back with its lists empty.

    Returns None when nothing may be sent: a Produce with acks=0 is never answered.

    Raises:
        UnsupportedRequest: kio has no response schema for the request's version.
    """
    key, version = request.api_key, request.api_version
    try:
        fields = {field.name for field in dataclasses.fields(response_class(key, version))}
    except (UnknownAPIKey, UnknownEntity) as exc:
        raise UnsupportedRequest(str(exc), key, version, request.correlation_id) from exc
    if key == PRODUCE and getattr(request.body, "acks", -1) == 0:
        return None
    answer: dict[str, Any] = {}
    if "error_code" in fields:
        answer["error_code"] = error
    if "error_message" in fields:
        answer["error_message"] = message
    response = build_response(key, version, answer)
    return encode_response(request.correlation_id, response)
