"""Calling handlers directly, as the server does."""

from __future__ import annotations

from typing import Any

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers import GROUP_HANDLERS, HANDLERS
from tabletopic.broker.protocol import WireResponse, build_response, encode_response
from tabletopic.broker.server import HAND_ENCODED
from tests.support.raw_kafka_client import decode_response


async def call(state: Any, request: Any) -> Any:
    """Run a handler and return the kio response object of the request's version (also encoding it,
    so a field the version cannot carry fails the test). ``state`` is the broker service, or the
    group coordinator for the consumer-group APIs."""
    key, version = request.__api_key__, request.__version__
    ctx = RequestContext(key, version, 1, "test", "127.0.0.1", 1)
    handler = GROUP_HANDLERS[key] if key in GROUP_HANDLERS else HANDLERS[key]
    fields = await handler(state, ctx, request)
    if fields is None:
        return None
    hand_encoded = HAND_ENCODED.get(key)
    if isinstance(fields, WireResponse) or hand_encoded is not None:
        # Hand-encoded (as the server does): it must decode with kio's reader for this version, to
        # the exact length.
        pieces = fields.buffers if isinstance(fields, WireResponse) else hand_encoded(1, version, fields)
        wire = b"".join(bytes(piece) for piece in pieces)
        assert int.from_bytes(wire[:4], "big") == len(wire) - 4
        correlation_id, response = decode_response(wire[4:], key, version)
        assert correlation_id == ctx.correlation_id
        return response
    response = build_response(key, version, fields)
    encode_response(1, response)
    return response
