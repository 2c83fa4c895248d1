"""Fuzzing the request path: any bytes after a valid header either fail to parse (MalformedFrame:
the connection is closed) or parse into a request every handler answers without raising."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.broker.protocol import MalformedFrame, UnsupportedRequest, parse_request
from tabletopic.broker.protocol.versions import MAX_VERSIONS, advertised_ranges
from tests.support.broker_calls import call
from tests.support.request_fuzz import HANDLED, HANDLED_IDS, as_sent, requests_of, without_long_poll

SERVED = [
    (key, version)
    for key, low, high in advertised_ranges(MAX_VERSIONS)
    if key not in (17, 36)
    for version in range(low, high + 1)
]


def _frame(api_key: int, version: int, body: bytes, flexible_header: bool) -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 4) + b"fuzz"
    return header + (b"\x00" if flexible_header else b"") + body


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=st.sampled_from(SERVED), body=st.binary(max_size=96), flexible=st.booleans())
async def test_random_bodies_never_crash_a_handler(broker_service, case, body, flexible) -> None:
    api_key, version = case
    if broker_service.topics.get("t") is None:
        await broker_service.topics.create("t", 2)
    try:
        request = parse_request(_frame(api_key, version, body, flexible), MAX_VERSIONS)
    except (MalformedFrame, UnsupportedRequest):
        return
    await call(broker_service, request.body)


@pytest.mark.parametrize("size", [0, 1, 5, 7])
def test_frames_shorter_than_a_header_are_malformed(size: int) -> None:
    with pytest.raises(MalformedFrame):
        parse_request(b"\x00" * size, MAX_VERSIONS)


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (3, 12, "ffffffff0f"),  # Metadata topics: compact array of 2**32 - 2
        (0, 9, "00000100007530ffffffff0f"),  # Produce topic_data
        (19, 7, "ffffffff0f"),  # CreateTopics topics
        (1, 4, "ffffffff000001f400000001000fffff007fffffff"),  # legacy int32 count
    ],
)
def test_huge_array_counts_are_refused_before_kio_allocates(api_key: int, version: int, body: str) -> None:
    """kio reserves memory from the declared count; 2**32 elements aborted the whole process."""
    with pytest.raises(MalformedFrame, match="runs past the end"):
        parse_request(
            _frame(api_key, version, bytes.fromhex(body), version >= 9 or api_key == 19), MAX_VERSIONS
        )


def test_null_for_a_non_nullable_array_is_malformed() -> None:
    # Produce v9: transactional_id null, acks 1, timeout, then topic_data as a null compact array.
    body = bytes.fromhex("0000010000753000")
    with pytest.raises(MalformedFrame, match="non-nullable"):
        parse_request(_frame(0, 9, body, True), MAX_VERSIONS)


async def test_fetch_with_the_all_zero_topic_id_is_an_unknown_topic(broker_service) -> None:
    import uuid

    from tests.support.kafka_requests import fetch_request

    response = await call(broker_service, fetch_request("t", 0, 0, version=15, topic_id=uuid.UUID(int=0)))
    from kio.schema.errors import ErrorCode

    assert response.responses[0].partitions[0].error_code is ErrorCode.unknown_topic_id


def _all_served() -> list[tuple[int, int]]:
    from tabletopic.broker.protocol.versions import GROUP_MAX_VERSIONS

    ranges = advertised_ranges({**MAX_VERSIONS, **GROUP_MAX_VERSIONS})
    return [(key, version) for key, low, high in ranges for version in range(low, high + 1)]


@pytest.mark.parametrize(("api_key", "version"), _all_served(), ids=[f"{k}v{v}" for k, v in _all_served()])
def test_the_length_guard_accepts_every_valid_request(api_key: int, version: int) -> None:
    """Random valid requests (hypothesis builds them from kio's types, kio encodes them) all pass
    the guard: it must never refuse what a real client may send."""
    import io

    from kio.index import load_request_schema
    from kio.serial import entity_writer

    from tabletopic.broker.protocol.guard import check_lengths

    request_type = load_request_schema(api_key, version)
    write = entity_writer(request_type)

    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
    @given(requests_of(api_key, version))
    def roundtrip(request: object) -> None:
        buffer = io.BytesIO()
        try:
            write(buffer, request)
        except (ValueError, OverflowError, TypeError, UnicodeError, struct.error):
            return  # hypothesis built a value the writer itself rejects
        check_lengths(request_type, memoryview(buffer.getvalue()), 0)

    roundtrip()


@pytest.mark.parametrize(("api_key", "version"), HANDLED, ids=HANDLED_IDS)
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
async def test_every_handler_answers_well_formed_requests_of_its_versions(
    broker_service, coordinator, api_key: int, version: int, data: st.DataObject
) -> None:
    """Random well-formed requests get an answer the client's version can encode. A handler that
    raises, or answers a field the version cannot carry, makes the server log a traceback and close
    the connection instead of answering in Kafka's terms (Metadata v10 asked by topic id named the
    topic null)."""
    from tabletopic.broker.handlers import GROUP_HANDLERS

    if broker_service.topics.get("t") is None:
        await broker_service.topics.create("t", 2)
    sent = as_sent(data.draw(requests_of(api_key, version)))
    if sent is None:
        return
    body = without_long_poll(sent[1].body)
    await asyncio.wait_for(call(coordinator if api_key in GROUP_HANDLERS else broker_service, body), 20)
