"""Errors the protocol layer raises, split by fault as h11 does: the peer broke the protocol (its
frame cannot be understood) or asked for something we do not serve. Each carries what the server
should do about it."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class ProtocolError(Exception):
    """Root of every error of the sans-IO protocol layer."""


class MalformedFrame(ProtocolError):
    """The bytes cannot be parsed as a request: the connection must be closed (there is no
    trustworthy correlation id to answer with)."""


class FrameTooLarge(MalformedFrame):
    """The length prefix exceeds ``socket.request.max.bytes``: close before allocating anything."""


class UnsupportedRequest(ProtocolError):
    """A well-framed request for an API key or version we do not serve.

    ``correlation_id`` lets the server answer ApiVersions in the v0 format (KIP-511). A version
    above ours of an API we serve is answered UNSUPPORTED_VERSION in that version's response when
    kio knows its schema (``codec.encode_unsupported_version``); an unknown API key, or a version
    no schema describes, closes the connection.
    """

    def __init__(self, message: str, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.error_code = ErrorCode.unsupported_version
