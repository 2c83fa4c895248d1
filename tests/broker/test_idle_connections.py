"""``connections.max.idle.ms``: a connection with nothing read or written for that long, and no
request in flight, is closed, as a Kafka broker closes it. A long-poll Fetch waiting past the idle
time is a request in flight and keeps its connection."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from tests.support.inproc_broker import inproc_broker
from tests.support.kafka_requests import fetch_request, request
from tests.support.raw_kafka_client import connect, is_closed_by_peer, roundtrip

IDLE_MS = 1000
VERSIONS = request(18, 3, client_software_name="raw", client_software_version="1")


def _idle_connection_is_closed(bootstrap: str) -> float:
    """Seconds from the last answer until the broker closed the connection (-1: it did not)."""
    sock = connect(bootstrap)
    try:
        assert roundtrip(sock, VERSIONS).error_code is ErrorCode.none
        answered = time.monotonic()
        return time.monotonic() - answered if is_closed_by_peer(sock, timeout=10) else -1.0
    finally:
        sock.close()


def _long_poll_outlives_the_idle_time(bootstrap: str, topic: str) -> Any:
    sock = connect(bootstrap)
    try:
        # Nothing to read: the Fetch waits its full 3 s, three idle periods, in flight.
        return roundtrip(sock, fetch_request(topic, 0, 0, max_wait=3 * IDLE_MS))
    finally:
        sock.close()


async def test_an_idle_connection_is_closed_and_a_long_poll_is_not(tmp_path: Path) -> None:
    async with inproc_broker(tmp_path, **{"connections.max.idle.ms": str(IDLE_MS)}) as (broker, proxy):
        bootstrap = f"127.0.0.1:{proxy.port}"
        await broker.topics.create("quiet", 1, {})
        waited = await asyncio.to_thread(_idle_connection_is_closed, bootstrap)
        assert IDLE_MS / 1000 <= waited < 3 * IDLE_MS / 1000, waited
        answer = await asyncio.to_thread(_long_poll_outlives_the_idle_time, bootstrap, "quiet")
        assert answer.responses[0].partitions[0].error_code is ErrorCode.none
