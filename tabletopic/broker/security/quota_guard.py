"""Quota enforcement around the handlers, as Kafka does it (KIP-219): a client over its quota still
gets its answer at once, carrying ``throttle_time_ms``, and the broker then holds back that
connection's next request for that long. A Fetch arriving while its client is over the consumer
byte rate is answered empty with the throttle time, without reading anything.

Produce bytes count against ``producer_byte_rate``, Fetch response bytes against
``consumer_byte_rate``, and the time spent in any handler against ``request_percentage`` (percent
of one request thread). Without any quota stored, a request costs one dict lookup.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any, cast

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol import WireResponse
from tabletopic.broker.protocol.messages.produce import ProduceRequest
from tabletopic.broker.security.guard import Handler, Response
from tabletopic.broker.security.quota_service import QuotaService
from tabletopic.broker.security.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE

PRODUCE, FETCH, METADATA = 0, 1, 3
# Self-encoded responses: {api key: (first version with throttle_time_ms, first flexible version)}.
_SELF_ENCODED = {FETCH: (1, 12), METADATA: (3, 9)}
_I32 = struct.Struct(">i")


def user_of(principal: str) -> str:
    """``User:alice`` -> ``alice``: quota entities name users without the principal type."""
    kind, sep, name = principal.partition(":")
    return name if sep and kind == "User" else principal


def produce_bytes(request: ProduceRequest) -> int:
    return sum(
        len(partition.records or b"") for topic in request.topic_data for partition in topic.partition_data
    )


def response_bytes(response: Response) -> int:
    if isinstance(response, WireResponse):
        return sum(len(piece) for piece in response.buffers)
    return 0


def with_throttle(response: Response, throttle: int, ctx: RequestContext) -> Response:
    """The response with ``throttle_time_ms`` set; a self-encoded Fetch or Metadata gets it patched
    in place (the field right after the response header), when its version has the field."""
    if response is None or throttle <= 0:
        return response
    if isinstance(response, dict):
        return {**response, "throttle_time": throttle} if "throttle_time" in response else response
    throttled_from, flexible_from = _SELF_ENCODED.get(ctx.api_key, (0, 1 << 15))
    if ctx.api_version < throttled_from:
        return response
    offset = 8 + (1 if ctx.api_version >= flexible_from else 0)
    buffers = list(response.buffers)
    position = 0
    for i, piece in enumerate(buffers):
        if position + len(piece) >= offset + 4 and offset >= position:
            patched = bytearray(piece)
            _I32.pack_into(patched, offset - position, throttle)
            buffers[i] = patched
            return WireResponse(buffers)
        position += len(piece)
    return response


class QuotaGuard:
    """Wraps handlers with quota accounting; one per node."""

    def __init__(self, quotas: QuotaService) -> None:
        self._tracker = quotas.tracker
        self._muted_until: dict[int, float] = {}

    def wrap(self, api_key: int, handler: Handler) -> Handler:
        tracker = self._tracker

        async def quota_checked(target: Any, ctx: RequestContext, request: object) -> Response:
            if not tracker.quotas and not self._muted_until:
                return await handler(target, ctx, request)
            await self._wait_if_muted(ctx.connection_id)
            user, client = user_of(ctx.principal), ctx.client_id or ""
            if api_key == FETCH:
                waiting = tracker.current_throttle(user, client, CONSUMER_BYTE_RATE)
                if waiting > 0:
                    self._mute(ctx.connection_id, waiting)
                    return {"throttle_time": waiting, "error_code": 0, "session_id": 0, "responses": []}
            started = time.perf_counter()
            response = await handler(target, ctx, request)
            throttle = tracker.record(user, client, REQUEST_PERCENTAGE, (time.perf_counter() - started) * 100)
            if api_key == PRODUCE:
                throttle = max(
                    throttle,
                    tracker.record(
                        user, client, PRODUCER_BYTE_RATE, produce_bytes(cast(ProduceRequest, request))
                    ),
                )
            elif api_key == FETCH:
                throttle = max(
                    throttle, tracker.record(user, client, CONSUMER_BYTE_RATE, response_bytes(response))
                )
            if throttle > 0:
                self._mute(ctx.connection_id, throttle)
                response = with_throttle(response, throttle, ctx)
            return response

        return quota_checked

    def _mute(self, connection_id: int, throttle_ms: int) -> None:
        now = time.monotonic()
        if len(self._muted_until) > 1024:  # closed connections leave entries behind; drop expired ones
            self._muted_until = {c: t for c, t in self._muted_until.items() if t > now}
        until = now + throttle_ms / 1000
        self._muted_until[connection_id] = max(until, self._muted_until.get(connection_id, 0.0))

    async def _wait_if_muted(self, connection_id: int) -> None:
        until = self._muted_until.get(connection_id)
        if until is None:
            return
        delay = until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if self._muted_until.get(connection_id) == until:
            del self._muted_until[connection_id]
