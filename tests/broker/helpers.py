"""Calling handlers directly, as the server does."""

from __future__ import annotations

from typing import Any

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers import HANDLERS
from tabletopic.broker.protocol import build_response, encode_response


async def call(broker: Any, request: Any) -> Any:
    """Run a handler and return the kio response object of the request's version (also encoding it,
    so a field the version cannot carry fails the test)."""
    key, version = request.__api_key__, request.__version__
    ctx = RequestContext(key, version, 1, "test", "127.0.0.1", 1)
    fields = await HANDLERS[key](broker, ctx, request)
    if fields is None:
        return None
    response = build_response(key, version, fields)
    encode_response(1, response)
    return response
