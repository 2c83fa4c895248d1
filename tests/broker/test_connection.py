"""KafkaConnection without a socket: frames fed whole, byte by byte and back to back give the same
answers; a frame larger than the shared buffer is read into its own; in-flight requests past
``queued.max.requests`` stop reading until answers drain."""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tabletopic.broker.handlers import HANDLERS
from tabletopic.broker.protocol.versions import MAX_VERSIONS, advertised_ranges
from tabletopic.broker.security.sasl import SaslServer, check_plain_password
from tabletopic.broker.server import READ_BUFFER_BYTES, Dispatcher, KafkaConnection, coalesce
from tests.support.kafka_requests import make_batch, produce_request
from tests.support.raw_kafka_client import decode_response, encode_request
from tests.support.waiting import wait_until


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.paused = False
        self.pause_calls = 0
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def writelines(self, pieces: list[Any]) -> None:
        for piece in pieces:
            self.written += piece

    def pause_reading(self) -> None:
        self.paused = True
        self.pause_calls += 1

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1234) if name == "peername" else None

    def frames(self) -> list[bytes]:
        result, data = [], bytes(self.written)
        while data:
            (length,) = struct.unpack_from(">i", data)
            result.append(data[4 : 4 + length])
            data = data[4 + length :]
        return result


def _connection(broker: Any, max_inflight: int = 64) -> tuple[KafkaConnection, FakeTransport]:
    dispatcher = Dispatcher(broker)
    dispatcher.add(HANDLERS, broker, MAX_VERSIONS)
    broker.api_ranges = advertised_ranges(dispatcher.max_versions)
    connection = KafkaConnection(dispatcher, "PLAINTEXT", None, 100 * 1024 * 1024, max_inflight)
    transport = FakeTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport


def _feed(connection: KafkaConnection, data: bytes, chunk: int) -> None:
    position = 0
    while position < len(data):
        buffer = connection.get_buffer(-1)
        size = min(chunk, len(buffer), len(data) - position)
        buffer[:size] = data[position : position + size]
        connection.buffer_updated(size)
        position += size


async def _drain(transport: FakeTransport, frames: int) -> None:
    await wait_until(lambda: len(transport.frames()) >= frames, timeout=5, message=f"{frames} answers")


def _api_versions_frames(count: int) -> bytes:
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    return b"".join(encode_request(request, i) for i in range(count))


async def test_whole_bytewise_and_chunked_input_give_identical_answers(broker_service) -> None:
    data = _api_versions_frames(5)
    answers = []
    for chunk in (len(data), 1, 7):
        connection, transport = _connection(broker_service)
        _feed(connection, data, chunk)
        await _drain(transport, 5)
        answers.append(transport.frames())
    assert answers[0] == answers[1] == answers[2]
    assert [decode_response(f, 18, 3)[0] for f in answers[0]] == [0, 1, 2, 3, 4]


async def test_frame_larger_than_the_shared_buffer_is_read_whole(broker_service) -> None:
    await broker_service.topics.create("big", 1)
    batch = make_batch([b"z" * (READ_BUFFER_BYTES + 1000)])
    data = encode_request(produce_request("big", 0, batch), 9) + _api_versions_frames(1)
    connection, transport = _connection(broker_service)
    _feed(connection, data, 65536)
    await _drain(transport, 2)
    frames = transport.frames()
    assert decode_response(frames[0], 0, 9)[1].responses[0].partition_responses[0].base_offset == 0
    assert decode_response(frames[1], 18, 3)[0] == 0
    # Kept as a read-only view into the frame's own buffer, not a copy (produce_reader lends it).
    [stored] = await broker_service.store.fetch(broker_service.topics.get("big").streams[0], 0, 10)
    assert isinstance(stored.payload, memoryview) and stored.payload.readonly
    assert bytes(stored.payload) == batch


async def test_reading_pauses_while_too_many_requests_are_in_flight(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    connection, transport = _connection(broker_service, max_inflight=4)
    # Long-polling fetches stay in flight until their max_wait ends.
    from tests.support.kafka_requests import fetch_request

    data = b"".join(encode_request(fetch_request("t", 0, 0, max_wait=300), i) for i in range(6))
    _feed(connection, data, len(data))
    assert transport.paused
    await _drain(transport, 6)
    assert not transport.paused
    assert transport.pause_calls >= 1


async def test_oversized_length_prefix_closes_before_allocating(broker_service) -> None:
    connection, transport = _connection(broker_service)
    _feed(connection, struct.pack(">i", 200 * 1024 * 1024), 4)
    assert transport.closed
    assert connection._big is None


def test_first_error_finds_nested_partition_errors() -> None:
    from kio.schema.errors import ErrorCode

    from tabletopic.broker.server import first_error

    fields = {
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {"index": 0, "error_code": ErrorCode.none},
                    {"index": 1, "error_code": ErrorCode.corrupt_message},
                ],
            }
        ]
    }
    assert first_error(fields) == "corrupt_message"
    assert first_error({"error_code": ErrorCode.none, "topics": []}) == "none"


def test_metadata_is_counted_by_its_topics_errors() -> None:
    """The request counter looks no deeper than Metadata's topics (ERROR_DEPTH): its partition
    entries carry no error, and walking thousands of them cost a third of encoding them."""
    from kio.schema.errors import ErrorCode

    from tabletopic.broker.server import ERROR_DEPTH, first_error

    missing = {"error_code": ErrorCode.unknown_topic_or_partition, "partitions": []}
    found = {"error_code": ErrorCode.none, "partitions": [{"error_code": ErrorCode.none}] * 3}
    assert first_error({"topics": [found, missing]}, ERROR_DEPTH[3]) == "unknown_topic_or_partition"
    assert first_error({"topics": [found]}, ERROR_DEPTH[3]) == "none"


async def test_global_request_budget_pauses_reading_until_answers_drain(broker_service) -> None:
    from tests.support.kafka_requests import fetch_request

    await broker_service.topics.create("t", 1)
    connection, transport = _connection(broker_service)
    budget = connection._dispatcher.budget
    budget.limit = 50  # smaller than one request
    other, other_transport = _connection(broker_service)
    other._budget = budget  # both connections share one budget, as in a server
    _feed(connection, encode_request(fetch_request("t", 0, 0, max_wait=300), 1), 10_000)
    assert transport.paused  # over budget: no more reads until the long poll is answered
    # A connection with nothing in flight still gets one request served.
    _feed(other, _api_versions_frames(1), 10_000)
    await _drain(other_transport, 1)
    assert not other_transport.paused
    await _drain(transport, 1)
    assert not transport.paused
    assert budget.used == 0


async def test_a_closed_connections_requests_run_to_their_end_but_its_long_polls_stop(broker_service) -> None:
    """A request that changes state finishes when its client hangs up, its answer dropped (a
    transaction's record once changed in memory and not in its row this way); a Fetch's long poll
    stops at once; the bytes of each stay counted in the request budget until it ends."""
    import asyncio

    from tabletopic.broker import server
    from tests.support.kafka_requests import fetch_request

    await broker_service.topics.create("t", 1)
    connection, transport = _connection(broker_service)
    go_on = asyncio.Event()
    finished: list[int] = []
    api_versions, target = connection._dispatcher.routes[18]

    async def slow_api_versions(target: Any, ctx: Any, request: Any) -> Any:
        await go_on.wait()
        finished.append(ctx.correlation_id)
        return await api_versions(target, ctx, request)

    connection._dispatcher.routes[18] = (slow_api_versions, target)
    long_poll = encode_request(fetch_request("t", 0, 0, max_wait=30_000), 1)
    slow = encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 2)
    _feed(connection, long_poll + slow, 10_000)
    budget = connection._dispatcher.budget
    assert budget.used == len(long_poll) + len(slow) - 8  # the frames without their length prefixes

    connection.connection_lost(None)
    await wait_until(lambda: budget.used == len(slow) - 4, timeout=5, message="the long poll stopped")
    assert connection in server._FINISHING
    go_on.set()
    await wait_until(lambda: budget.used == 0, timeout=5, message="the request finished")
    assert finished == [2]
    assert transport.written == b""  # no one to answer
    assert connection not in server._FINISHING


async def test_sasl_handshake_v0_then_raw_token_authenticates_the_connection(broker_service) -> None:
    import struct as _struct

    from tabletopic.broker.security.sasl import SaslState
    from tests.support.kafka_requests import request

    dispatcher = Dispatcher(broker_service)
    dispatcher.add(HANDLERS, broker_service, MAX_VERSIONS)
    dispatcher.add({17: HANDLERS[18], 36: HANDLERS[18]}, None, MAX_VERSIONS)  # routed to the SASL state
    broker_service.api_ranges = advertised_ranges(dispatcher.max_versions)
    connection = KafkaConnection(dispatcher, "SASL_PLAINTEXT", _plain({"alice": "pw"}), 1 << 20, 8)
    transport = FakeTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    _feed(connection, encode_request(request(17, 0, mechanism="PLAIN"), 1), 4096)
    await _drain(transport, 1)
    assert connection._sasl is not None and connection._sasl.state is SaslState.AWAIT_RAW_TOKEN
    token = b"\0alice\0pw"
    _feed(connection, _struct.pack(">i", len(token)) + token, 4096)
    await _drain(transport, 2)
    assert transport.frames()[1] == b""  # the empty server token completes PLAIN
    assert connection._sasl.state is SaslState.AUTHENTICATED
    assert not transport.closed


async def test_requests_before_sasl_authentication_close_the_connection(broker_service) -> None:
    from tests.support.kafka_requests import request

    dispatcher = Dispatcher(broker_service)
    dispatcher.add(HANDLERS, broker_service, MAX_VERSIONS)
    connection = KafkaConnection(dispatcher, "SASL_PLAINTEXT", _plain({"alice": "pw"}), 1 << 20, 8)
    transport = FakeTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    metadata = request(
        3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    _feed(connection, encode_request(metadata, 1), 4096)
    assert transport.closed


def _plain(users: dict[str, str]) -> SaslServer:
    return SaslServer(["PLAIN"], check_plain_password(users), lambda user, mechanism: None)


def test_coalesce_merges_small_pieces_keeps_large_ones_and_the_bytes() -> None:
    # A Fetch response over TLS: 8-byte base-offset pieces in front of each stored batch.
    pieces: list[bytes | memoryview] = [b"head"]
    for i in range(50):
        pieces += [bytes([i]) * 8, memoryview(bytes([i]) * 1000)]
    pieces += [b"L" * 300, b"tail"]
    merged = coalesce(pieces, chunk=4096)
    assert b"".join(merged) == b"".join(pieces)
    assert len(merged) <= len(pieces) // 5
    assert all(len(m) <= 4096 for m in merged)
    # A piece of chunk size or more goes through as the same object (no copy).
    big = memoryview(b"x" * 4096)
    assert any(m is big for m in coalesce([b"a", big, b"b"], chunk=1024))
    assert coalesce([], chunk=16) == []
