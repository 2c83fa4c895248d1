"""Kafka connections on asyncio: framing into preallocated buffers, ordered pipelined dispatch,
backpressure, TLS and SASL gating. Everything protocol-shaped lives in ``broker/protocol``.

Each connection reads frames into one reusable 256 KiB buffer and parses them in place (the only
copy of a Produce payload is the one the codec hands to the handler); a frame larger than that gets
a buffer of exactly its size that the socket reads straight into.
Requests are dispatched as tasks in arrival order and answered strictly in that order; when
``queued.max.requests`` are in flight, or the socket's write buffer is full, the connection stops
reading until it drains.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import itertools
import logging
import struct
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import numpy as np
import sqlalchemy.exc
from kio.schema.errors import ErrorCode

from tabletopic import database
from tabletopic.broker import settings
from tabletopic.broker.context import RequestContext, SecurityProtocol
from tabletopic.broker.handlers import State, handlers_of
from tabletopic.broker.listeners import (
    Endpoint,
    advertised_endpoints,
    configured_listeners,
    inter_broker_listener,
)
from tabletopic.broker.metrics import api_name
from tabletopic.broker.protocol import (
    MalformedFrame,
    Request,
    UnsupportedRequest,
    WireResponse,
    build_response,
    encode_api_versions_fallback,
    encode_refusal,
    encode_response,
    encode_unsupported_version,
    nul_field,
    parse_request,
)
from tabletopic.broker.protocol.metadata_encoder import encode_metadata_response
from tabletopic.broker.protocol.produce_encoder import encode_produce_response
from tabletopic.broker.protocol.versions import GROUP_MAX_VERSIONS, MAX_VERSIONS, SECURITY_MAX_VERSIONS
from tabletopic.broker.security.inter_broker import InterBrokerClient
from tabletopic.broker.security.listener import ListenerSecurity
from tabletopic.broker.security.sasl import SASL_API_KEYS, SaslServer
from tabletopic.broker.security.tls import peer_principal
from tabletopic.broker.service import BrokerService
from tabletopic.config import Config, ConfigError, StartupError
from tabletopic.log_limit import RateLimitedLog
from tabletopic.tasks import cancel_and_wait

# APIs whose handlers answer fields (so guards and quotas see them as they see every API's) but
# whose answers kio's writer makes too slowly: Metadata of every topic of a large cluster, and
# Produce, answered once per partition and batch to librdkafka.
HAND_ENCODED: dict[int, Callable[[int, int, dict[str, Any]], list[Any]]] = {
    0: encode_produce_response,
    3: encode_metadata_response,
}
# How deep the request counter looks for an answer's error (first_error), where not 4: Metadata's
# partition entries carry no error of their own (a topic's does), and walking thousands of them
# for each answer took a third of the time of encoding them.
ERROR_DEPTH = {3: 2}
# APIs whose requests in flight are stopped when their connection closes: reads that only wait (a
# Fetch's long poll), which change nothing and whose answer no one can hear. Every other request
# runs to its end with its answer dropped, as in Kafka's broker (see connection_lost).
STOPPED_WITH_CONNECTION = frozenset({1})
log = logging.getLogger(__name__)
# Connections closed for protocol violations (garbage, oversized frames, failed SASL): one warning per
# kind every 10 s, with a count of the rest, so a misbehaving client cannot flood the log.
CLOSE_LOG = RateLimitedLog(log, interval_s=10.0)

READ_BUFFER_BYTES = 256 * 1024
MIN_FREE_BYTES = 16 * 1024
# TLS writes: pieces of a response are merged up to this size before encryption (see coalesce).
TLS_WRITE_CHUNK_BYTES = 256 * 1024
_LENGTH = struct.Struct(">i")
_connection_ids = itertools.count(1)
# Closed connections whose requests are still running (see KafkaConnection.connection_lost): held
# here until the last one ends, so neither they nor their tasks are collected half way.
_FINISHING: set[KafkaConnection] = set()

# (target, ctx, request) -> newest-shaped dict, a self-encoded WireResponse, or None for "no response"
Handler = Callable[[Any, RequestContext, Any], Awaitable[dict[str, Any] | WireResponse | None]]


def _frame_buffer(length: int) -> memoryview:
    """A buffer of its own for a frame larger than the shared read buffer. Uninitialised: the socket
    fills every byte, and ``bytearray(length)`` would first zero a megabyte or so per produce
    request at throughput (5% of the broker's CPU at 1 KiB messages). Its records are lent to the
    store (see protocol/produce_reader), so it is never written again once filled."""
    return np.empty(length, dtype=np.uint8).data


def first_error(fields: Any, depth: int = 4) -> str:
    """The name of the first error in a response dict (top level first, then nested entries), so
    the request counter also shows per-partition errors such as a Produce's CORRUPT_MESSAGE."""
    if isinstance(fields, dict):
        error = fields.get("error_code")
        if isinstance(error, ErrorCode) and error is not ErrorCode.none:
            return error.name
        if depth:
            for value in fields.values():
                if isinstance(value, list | tuple):
                    found = first_error(value, depth - 1)
                    if found != "none":
                        return found
    elif isinstance(fields, list | tuple) and depth:
        for item in fields:
            found = first_error(item, depth - 1)
            if found != "none":
                return found
    return "none"


def coalesce(buffers: list[Any], chunk: int = TLS_WRITE_CHUNK_BYTES) -> list[Any]:
    """The same bytes as fewer, larger buffers: runs of pieces are joined up to ``chunk`` bytes, and
    a piece of ``chunk`` bytes or more is passed on as it is.

    Over TLS each buffer handed to the transport is encrypted on its own, so the 8-byte base-offset
    piece in front of every stored batch of a Fetch response would become a TLS record of its own
    (a record header, a tag and a decryption call on the client for 8 bytes). A plaintext socket
    takes the pieces with one ``writev`` and never needs this.
    """
    out: list[Any] = []
    run: list[Any] = []
    size = 0
    for piece in buffers:
        length = len(piece)
        if length >= chunk:
            if run:
                out.append(b"".join(run) if len(run) > 1 else run[0])
                run, size = [], 0
            out.append(piece)
            continue
        if size + length > chunk and run:
            out.append(b"".join(run) if len(run) > 1 else run[0])
            run, size = [], 0
        run.append(piece)
        size += length
    if run:
        out.append(b"".join(run) if len(run) > 1 else run[0])
    return out


class RequestBudget:
    """Bytes of requests in flight on all connections together (``queued.max.request.bytes``).

    Past the limit every connection that receives a request stops reading until enough answers
    went out; a single request larger than the limit is still served (alone), so nothing starves.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: set[KafkaConnection] = set()

    @property
    def exhausted(self) -> bool:
        return self.limit > 0 and self.used >= self.limit

    def acquire(self, size: int) -> None:
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size
        if self._waiting and not self.exhausted:
            waiting, self._waiting = self._waiting, set()
            for connection in waiting:
                connection._update_reading()

    def wait(self, connection: KafkaConnection) -> None:
        self._waiting.add(connection)

    def forget(self, connection: KafkaConnection) -> None:
        self._waiting.discard(connection)


class Dispatcher:
    """API key -> (handler, the object it runs against) plus the version table to advertise."""

    def __init__(self, broker: BrokerService, budget: RequestBudget | None = None) -> None:
        self.broker = broker
        self.routes: dict[int, tuple[Handler, Any]] = {}
        self.max_versions: dict[int, int] = {}
        self.budget = budget or RequestBudget(0)
        # Wraps each handler as it is added (ACL enforcement, broker/security/guard.py).
        self.wrap: Callable[[int, Handler], Handler] | None = None

    def add(self, handlers: Mapping[int, Handler], target: Any, max_versions: Mapping[int, int]) -> None:
        for key, handler in handlers.items():
            if key in max_versions:
                self.routes[key] = (self.wrap(key, handler) if self.wrap else handler, target)
                self.max_versions[key] = max_versions[key]

    def add_broker_apis(self) -> None:
        """Route the broker's own APIs (``broker/handlers`` APIS run against the broker service) to
        the broker service. The server is the only module that imports the handlers: nothing below
        it may reach up."""
        self.add(handlers_of(State.BROKER), self.broker, MAX_VERSIONS)

    def add_security_apis(self, acls: Any, quotas: Any, credentials: Any) -> None:
        """Route the ACL, quota and SCRAM APIs (``broker/handlers`` APIS run against the node's
        security state) to the ACL service, the quota service and the credential store."""
        for state, target in ((State.ACLS, acls), (State.QUOTAS, quotas), (State.SCRAM, credentials)):
            self.add(handlers_of(state), target, SECURITY_MAX_VERSIONS)

    def add_group_apis(
        self, coordinator: Any, adapt: Callable[[dict[int, Handler]], dict[int, Handler]] | None = None
    ) -> None:
        """Route the consumer- and share-group APIs (``broker/handlers`` APIS run against the group
        coordinator) to ``coordinator``, after ``adapt`` replaced the handlers the assembly wraps."""
        handlers: dict[int, Handler] = handlers_of(State.GROUPS)
        self.add(adapt(handlers) if adapt is not None else handlers, coordinator, GROUP_MAX_VERSIONS)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        dispatcher: Dispatcher,
        listener: str,
        sasl: SaslServer | None,
        max_frame: int,
        max_inflight: int,
        failed_auth_delay_s: float = 0.0,
        max_frame_before_auth: int | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._broker = dispatcher.broker
        self._metrics = dispatcher.broker.metrics
        self._listener = listener
        self._sasl = sasl
        self._failed_auth_delay_s = failed_auth_delay_s
        # The principal of a verified TLS client certificate (SSL listeners), else ANONYMOUS.
        self._tls_principal: str | None = None
        self._tls = False  # an SSL or SASL_SSL connection: responses are coalesced before writing
        self._max_frame = max_frame
        # Until a SASL client has authenticated, an anonymous peer may not make the broker buffer
        # up to socket.request.max.bytes (CVE-2022-34917): sasl.server.max.receive.size applies.
        self._max_frame_before_auth = min(max_frame, max_frame_before_auth or max_frame)
        self._max_inflight = max_inflight
        self._buffer = bytearray(READ_BUFFER_BYTES)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._big: memoryview | None = None
        self._big_filled = 0
        self._pending: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._pending_sizes: collections.deque[int] = collections.deque()  # request bytes, same order
        self._stoppable: set[asyncio.Future[Any]] = set()  # in _pending, of STOPPED_WITH_CONNECTION
        self._budget = dispatcher.budget
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._closed = False
        self._close_after_flush: str | None = None
        self._close_scheduled = False  # a failed authentication: closing after the delay
        self.connection_id = next(_connection_ids)
        self._peer = "?"
        self.last_active = time.monotonic()  # the last request bytes read or response written

    # --- transport callbacks --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        ssl_object = transport.get_extra_info("ssl_object")
        self._tls = ssl_object is not None
        self._tls_principal = peer_principal(ssl_object)
        if self._metrics is not None:
            self._metrics.connections.inc()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the long polls in flight; let every other request run to its end, its answer dropped.

        A request that changes state must not stop half way when its client goes (or when the
        server closes the connection because the database failed another request on it): a
        transaction's record changed in memory but not in its row, a topic deleted from the
        database but not from the broker. Kafka's broker likewise finishes what it has read and
        drops the answers. Their bytes stay counted in ``queued.max.request.bytes`` until they
        end (``_flush`` releases them), so clients that send and hang up cannot exceed it."""
        self._closed = True
        for future in self._stoppable:
            future.cancel()
        if self._pending:
            _FINISHING.add(self)  # the requests' tasks hold no reference to the connection
        self._budget.forget(self)
        if self._metrics is not None:
            self._metrics.connections.dec()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return self._big[self._big_filled :]
        if len(self._buffer) - self._end < MIN_FREE_BYTES:
            remaining = self._end - self._start
            self._view[:remaining] = self._view[self._start : self._end]
            self._start, self._end = 0, remaining
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        if self._metrics is not None:
            self._metrics.bytes_in.inc(nbytes)
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled < len(self._big):
                return
            big, self._big = self._big, None
            # This buffer is the frame's alone and never written again: its records can be lent.
            self._on_frame(big.toreadonly(), lend=True)
            return
        self._end += nbytes
        while not self._closed:
            available = self._end - self._start
            if available < 4:
                break
            (length,) = _LENGTH.unpack_from(self._buffer, self._start)
            if length < 8 or length > self._max_frame:
                self._close(
                    f"frame length {length} outside [8, {self._max_frame}] (socket.request.max.bytes)"
                )
                return
            if (
                length > self._max_frame_before_auth
                and self._sasl is not None
                and self._sasl.principal is None
            ):
                self._close(
                    f"frame length {length} before SASL authentication is over "
                    f"{self._max_frame_before_auth} (sasl.server.max.receive.size)"
                )
                return
            if available - 4 >= length:
                begin = self._start + 4
                self._start = begin + length
                # Parsed straight from the shared buffer: the codec copies out what it keeps, and
                # nothing reads the frame after _on_frame returns.
                self._on_frame(self._view[begin : begin + length])
                continue
            if length + 4 > len(self._buffer):
                # Too big for the shared buffer: read the rest straight into its own buffer.
                self._big = _frame_buffer(length)
                already = available - 4
                self._big[:already] = self._view[self._start + 4 : self._end]
                self._big_filled = already
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0

    def eof_received(self) -> bool | None:
        return None

    # --- dispatch -------------------------------------------------------------------------------
    def _close_after_delay(self, reason: str) -> None:
        """Close once the failed-authentication delay has passed, reading nothing meanwhile."""
        self._close_after_flush = None
        if self._failed_auth_delay_s <= 0 or self._transport is None or self._closed:
            self._close(reason)
            return
        self._close_scheduled = True
        if not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True
        asyncio.get_running_loop().call_later(self._failed_auth_delay_s, self._close, reason)

    def close_if_idle(self, since: float) -> None:
        """Close the connection if nothing was read or written since ``since`` (monotonic) and no
        request is in flight: ``connections.max.idle.ms``, as a Kafka broker does. An ordinary
        event, so one debug line, not the warning of :meth:`_close`."""
        if self._closed or self._pending or self.last_active >= since or self._transport is None:
            return
        log.debug("closing connection %d from %s: idle", self.connection_id, self._peer)
        self._closed = True
        self._transport.close()

    def _close(self, reason: str) -> None:
        if not self._closed:
            CLOSE_LOG.warning(
                "close", "closing connection %d from %s: %s", self.connection_id, self._peer, reason
            )
            self._closed = True
            if self._transport is not None:
                self._transport.close()

    def _on_frame(self, frame: bytes | memoryview, lend: bool = False) -> None:
        if self._sasl is not None and self._sasl.expects_raw_token:
            self._raw_sasl_token(bytes(frame))
            return
        try:
            request = parse_request(frame, self._dispatcher.max_versions, lend)
        except UnsupportedRequest as exc:
            if exc.api_key == 18:
                # KIP-511: answer in v0 so the client can pick a version from our list.
                data = encode_api_versions_fallback(
                    exc.correlation_id, self._broker.api_ranges, ErrorCode.unsupported_version
                )
                self._enqueue_ready(data)
                self._count(exc.api_key, "unsupported_version")
                return
            self._refuse_version(frame, exc)
            return
        except MalformedFrame as exc:
            self._close(str(exc))
            return
        if self._sasl is not None and not self._sasl.allows(request.api_key):
            expired = self._sasl.session_expired
            why = "after the SASL session expired" if expired else "before SASL authentication"
            self._close(f"{api_name(request.api_key)} {why}")
            return
        unstorable = nul_field(request.client_id, request.body)
        if unstorable is not None:
            reason = f"{unstorable} holds a NUL character, which the metadata database cannot store"
            refusal = self._refuse_unstorable(request, reason)
            if refusal is not None:
                self._enqueue_ready(refusal)
            return
        task = asyncio.ensure_future(self._serve(request))
        if request.api_key in STOPPED_WITH_CONNECTION:
            self._stoppable.add(task)
            task.add_done_callback(self._stoppable.discard)
        self._pending.append(task)
        self._pending_sizes.append(len(frame))
        self._budget.acquire(len(frame))
        task.add_done_callback(self._flush)
        self._update_reading()

    def _refuse_version(self, frame: bytes | memoryview, exc: UnsupportedRequest) -> None:
        """A version above ours of an API we serve: answer UNSUPPORTED_VERSION in that version's
        response (a client that ignored ApiVersions learns why); an unknown API key, a version
        kio has no schema for or a frame that does not parse closes the connection."""
        maximum = self._dispatcher.max_versions.get(exc.api_key)
        if maximum is None or (self._sasl is not None and not self._sasl.allows(exc.api_key)):
            self._close(str(exc))
            return
        try:
            data = encode_unsupported_version(frame, maximum)
        except (UnsupportedRequest, MalformedFrame) as refused:
            self._close(str(refused))
            return
        self._count(exc.api_key, "unsupported_version")
        if data is not None:
            self._enqueue_ready(data)

    def _refuse_unstorable(self, request: Request, reason: str) -> bytes | None:
        """INVALID_REQUEST for a request carrying a value the metadata database cannot store (a NUL
        character, see ``nul_strings``; a name longer than its column), in the request's own
        response, with one log line (rate-limited) instead of a traceback and a closed connection."""
        name = api_name(request.api_key)
        CLOSE_LOG.warning(
            "unstorable",
            "refused %s from %s on connection %d: %s",
            name,
            self._peer,
            self.connection_id,
            reason,
        )
        self._count(request.api_key, ErrorCode.invalid_request.name)
        return encode_refusal(request, ErrorCode.invalid_request, f"{name}: {reason}")

    def _enqueue_ready(self, data: bytes) -> None:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(data)
        self._pending.append(future)
        self._pending_sizes.append(0)
        self._flush(future)

    def _update_reading(self) -> None:
        if self._transport is None or self._closed or self._close_scheduled:
            return
        over_budget = self._budget.exhausted and bool(self._pending)
        if over_budget:
            self._budget.wait(self)
        should_pause = self._writing_paused or over_budget or len(self._pending) >= self._max_inflight
        if should_pause and not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            self._transport.resume_reading()
            self._reading_paused = False

    def _flush(self, _done: asyncio.Future[Any]) -> None:
        while self._pending and self._pending[0].done():
            future = self._pending.popleft()
            self._budget.release(self._pending_sizes.popleft())
            if future.cancelled():
                continue
            exc = future.exception()
            if isinstance(exc, database.UNREACHABLE):
                # The metadata database is restarting or away: what the request changed is
                # unknown. A closed connection is what every client retries, as after a broker's
                # restart; the traceback would say no more than this line.
                self._close(f"the metadata database could not serve it: {database.unreachable_message(exc)}")
                continue
            if exc is not None:
                log.error("handler failed on connection %d", self.connection_id, exc_info=exc)
                self._close(f"internal error: {type(exc).__name__}")
                continue
            data = future.result()
            if data is None or self._closed or self._transport is None:
                continue
            if isinstance(data, list):
                self._transport.writelines(coalesce(data) if self._tls else data)
                size = sum(len(piece) for piece in data)
            else:
                self._transport.write(data)
                size = len(data)
            self.last_active = time.monotonic()
            if self._metrics is not None:
                self._metrics.bytes_out.inc(size)
        if self._closed:
            if not self._pending:
                _FINISHING.discard(self)
            return
        if self._close_after_flush is not None and not self._pending:
            self._close_after_delay(self._close_after_flush)
            return
        self._update_reading()

    def _count(self, api_key: int, error: str) -> None:
        if self._metrics is not None:
            self._metrics.answered(api_key, error)

    async def _serve(self, request: Request) -> bytes | list[Any] | None:
        if self._metrics is None:
            return await self._answer(request)
        answered = self._metrics.request_started(request.api_key)
        try:
            return await self._answer(request)
        finally:
            answered()

    async def _answer(self, request: Request) -> bytes | list[Any] | None:
        key = request.api_key
        ctx = RequestContext(
            api_key=key,
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            client_host=self._peer,
            connection_id=self.connection_id,
            principal=self.principal,
            listener=self._listener,
        )
        started = time.perf_counter()
        if key in SASL_API_KEYS:
            fields: dict[str, Any] | WireResponse | None = await self._sasl_request(request)
        else:
            handler, target = self._dispatcher.routes[key]
            try:
                fields = await handler(target, ctx, request.body)
            except sqlalchemy.exc.DataError as exc:
                # A value no check caught that the database refuses (PostgreSQL: a string longer than
                # its column): the statement was rolled back, nothing of the request is stored.
                reason = f"the metadata database refused a value: {database.driver_message(exc)}"
                return self._refuse_unstorable(request, reason)
        if fields is None:
            self._count(key, "none")
            return None
        if isinstance(fields, WireResponse):
            if self._metrics is not None:
                self._metrics.took(key, time.perf_counter() - started)
            self._count(key, "none")
            return fields.buffers
        hand_encoded = HAND_ENCODED.get(key)
        if hand_encoded is not None:
            data: bytes | list[Any] = hand_encoded(request.correlation_id, request.api_version, fields)
        else:
            data = encode_response(request.correlation_id, build_response(key, request.api_version, fields))
        if self._metrics is not None:
            self._metrics.took(key, time.perf_counter() - started)
            self._count(key, first_error(fields, ERROR_DEPTH.get(key, 4)))
        return data

    # --- SASL -----------------------------------------------------------------------------------
    @property
    def principal(self) -> str:
        """Who the requests of this connection run as: the SASL principal, else the TLS client
        certificate's, else ``User:ANONYMOUS``."""
        if self._sasl is not None and self._sasl.principal is not None:
            return self._sasl.principal
        return self._tls_principal or "User:ANONYMOUS"

    async def _sasl_request(self, request: Request) -> dict[str, Any]:
        if self._sasl is None:  # as Kafka: ILLEGAL_SASL_STATE (SaslHandshake has no message field)
            refused: dict[str, Any] = {"error_code": ErrorCode.illegal_sasl_state}
            if request.api_key != 17:
                refused["error_message"] = "this listener does not use SASL"
            return refused
        if request.api_key == 17:
            code = self._sasl.handshake(request.body.mechanism, request.api_version)
            return {"error_code": code, "mechanisms": self._sasl.mechanisms}
        result = self._sasl.authenticate(request.body.auth_bytes)
        if result.error_code is not ErrorCode.none:
            self._log_auth_failure(result.detail)
            # As Kafka: the error is answered at once and the close is held back by
            # connection.failed.authentication.delay.ms (so a wrong password cannot be retried in
            # a tight loop). _flush writes this answer, stops reading and closes after the delay;
            # closing right behind the answer let some clients (kafka-python) see the close first
            # and report a dropped connection instead of the error.
            self._close_after_flush = "SASL authentication failed"
        return {
            "error_code": result.error_code,
            "error_message": result.message,
            "auth_bytes": result.challenge,
            "session_lifetime": result.session_lifetime_ms,
        }

    def _log_auth_failure(self, detail: str | None) -> None:
        CLOSE_LOG.warning(
            "sasl",
            "SASL authentication failed on connection %d from %s: %s",
            self.connection_id,
            self._peer,
            detail,
        )

    def _raw_sasl_token(self, token: bytes) -> None:
        """A token after SaslHandshake v0: the answer is a bare length-prefixed token, and a
        failure can only be told by closing the connection (Kafka does the same)."""
        assert self._sasl is not None
        result = self._sasl.authenticate(token)
        if result.error_code is not ErrorCode.none:
            self._log_auth_failure(result.detail)
            self._close(f"SASL authentication failed: {result.message}")
            return
        self._enqueue_ready(_LENGTH.pack(len(result.challenge)) + result.challenge)


class KafkaServer:
    """Every configured listener of one broker."""

    def __init__(
        self, broker: BrokerService, dispatcher: Dispatcher, security: ListenerSecurity | None = None
    ) -> None:
        self._broker = broker
        self._dispatcher = dispatcher
        self._security = security
        self._servers: list[asyncio.Server] = []
        self.bound: list[Endpoint] = []
        self._live: weakref.WeakSet[KafkaConnection] = weakref.WeakSet()
        self._reaper: asyncio.Task[None] | None = None

    async def bind(self) -> None:
        """Bind every listener (not serving yet) and publish the advertised endpoints."""
        config = self._broker.config
        max_frame = config.get(settings.SOCKET_REQUEST_MAX_BYTES)
        max_inflight = config.get(settings.QUEUED_MAX_REQUESTS)
        self._dispatcher.budget.limit = config.get(settings.QUEUED_MAX_REQUEST_BYTES)
        loop = asyncio.get_running_loop()
        for endpoint in configured_listeners(config):
            text = f"{endpoint.name}://{endpoint.host}:{endpoint.port}"
            try:
                server = await loop.create_server(
                    self._connection_factory(endpoint, max_frame, max_inflight),
                    endpoint.host,
                    endpoint.port,
                    reuse_address=True,
                    backlog=1024,
                    start_serving=False,
                    ssl=self._security.tls_context(endpoint) if self._security else None,
                )
            except OSError as exc:
                reason = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
                raise StartupError(
                    f"Kafka listener {text} cannot listen on {endpoint.host}:{endpoint.port}: {reason}; "
                    f"change {settings.LISTENERS.name}",
                    settings.LISTENERS.name,
                ) from exc
            port = server.sockets[0].getsockname()[1]
            self._servers.append(server)
            self.bound.append(endpoint.at(endpoint.host, port))
            log.info("Kafka listener %s (%s) on %s:%d", endpoint.name, endpoint.protocol, endpoint.host, port)
        advertised = advertised_endpoints(config, self.bound)
        listener = inter_broker_listener(config, advertised)
        self._broker.inter_broker_listener = listener
        protocol = advertised[listener].protocol
        self._broker.inter_broker_client = _inter_broker_client(config, listener, protocol)
        self._broker.advertised = advertised

    def _connection_factory(
        self, endpoint: Endpoint, max_frame: int, max_inflight: int
    ) -> Callable[[], KafkaConnection]:
        security = self._security
        protocol = endpoint.protocol
        if security is None and protocol is not SecurityProtocol.PLAINTEXT:
            raise ConfigError(
                f"listeners: the {protocol} listener {endpoint.name} needs the broker's security set up"
            )

        def factory() -> KafkaConnection:
            sasl = security.sasl_server(protocol) if security is not None else None
            delay = security.failed_auth_delay_s if security is not None else 0.0
            before_auth = security.max_receive_before_auth if security is not None else None
            connection = KafkaConnection(
                self._dispatcher, endpoint.name, sasl, max_frame, max_inflight, delay, before_auth
            )
            self._live.add(connection)
            return connection

        return factory

    async def serve(self) -> None:
        for server in self._servers:
            await server.start_serving()
        idle_s = self._broker.config.get(settings.CONNECTIONS_MAX_IDLE_MS) / 1000
        self._reaper = asyncio.create_task(self._close_idle(idle_s), name="idle-connections")

    async def _close_idle(self, idle_s: float) -> None:
        """Close the connections idle for ``idle_s`` seconds, looking a few times per period (a
        connection goes at most a quarter of the period late, and never more than 30 s)."""
        while True:
            await asyncio.sleep(min(idle_s / 4, 30.0))
            since = time.monotonic() - idle_s
            for connection in list(self._live):
                connection.close_if_idle(since)

    async def stop(self) -> None:
        if self._reaper is not None:
            await cancel_and_wait([self._reaper])
            self._reaper = None
        for server in self._servers:
            server.close()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=2)
            except TimeoutError:
                pass
        self._servers = []


def _inter_broker_client(config: Config, listener: str, protocol: str) -> InterBrokerClient:
    """The broker's own client for ``listener``. Without the credentials a SASL listener asks for,
    the node still serves (on one node only its dead-letter producer needs them), saying which key
    to set; a cluster's transaction markers then fail with that reason in the log."""
    try:
        return InterBrokerClient.from_config(config, listener, protocol)
    except ConfigError as exc:
        log.warning("the broker's own connections to %s cannot log in: %s", listener, exc)
        return InterBrokerClient(listener, protocol)
