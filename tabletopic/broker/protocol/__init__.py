"""The sans-IO Kafka protocol layer: framing, kio glue, version-tolerant responses, batch headers.

Nothing here imports asyncio, sockets or storage.
"""

from tabletopic.broker.protocol.builder import UnknownFieldError, build_entity, build_response
from tabletopic.broker.protocol.codec import (
    Request,
    WireResponse,
    encode_api_versions_fallback,
    encode_refusal,
    encode_response,
    encode_unsupported_version,
    parse_request,
    peek_header,
)
from tabletopic.broker.protocol.errors import (
    FrameTooLarge,
    MalformedFrame,
    ProtocolError,
    UnsupportedRequest,
)
from tabletopic.broker.protocol.nul_strings import nul_field

__all__ = [
    "FrameTooLarge",
    "MalformedFrame",
    "ProtocolError",
    "Request",
    "UnknownFieldError",
    "UnsupportedRequest",
    "WireResponse",
    "build_entity",
    "build_response",
    "encode_api_versions_fallback",
    "encode_refusal",
    "encode_response",
    "encode_unsupported_version",
    "nul_field",
    "parse_request",
    "peek_header",
]
