"""Random well-formed Kafka requests, for the tests that send what no ordinary client sends.

hypothesis builds a request of any served version from kio's types; a request counts only when
kio can encode it and the server's parser reads it back (:func:`as_sent`), as off a socket.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
from typing import Any

from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.static.primitive import Records

from tabletopic.broker.protocol import MalformedFrame, Request, parse_request
from tabletopic.broker.protocol.versions import GROUP_MAX_VERSIONS, MAX_VERSIONS, advertised_ranges
from tests.support.raw_kafka_client import encode_request

SERVED_VERSIONS = {**MAX_VERSIONS, **GROUP_MAX_VERSIONS}
# Every served (API key, version), but SaslHandshake (17) and SaslAuthenticate (36): those are the
# connection's own, answered before any rule or handler.
HANDLED = [
    (key, version)
    for key, low, high in advertised_ranges(SERVED_VERSIONS)
    if key not in (17, 36)
    for version in range(low, high + 1)
]
HANDLED_IDS = [f"{key}v{version}" for key, version in HANDLED]
SHORT_WAIT = datetime.timedelta(milliseconds=50)


def requests_of(api_key: int, version: int) -> st.SearchStrategy[Any]:
    """Random requests of one version; record sets are short random bytes (kio names no strategy)."""
    st.register_type_strategy(Records, st.binary(max_size=64).map(Records))
    return st.from_type(load_request_schema(api_key, version))


def without_long_poll(request: Any) -> Any:
    """A Fetch waits up to its max wait for data: 50 ms is enough for a test."""
    if request.__api_key__ == 1:
        return dataclasses.replace(request, max_wait=min(request.max_wait, SHORT_WAIT))
    return request


def as_sent(request: Any) -> tuple[bytes, Request] | None:
    """The frame (length prefix included) and what the server parses from it; None when no client
    could send it: a value kio's writer rejects, or one the server cannot parse (a retention time
    past what a timedelta holds), whose connection closes as ``test_robustness`` shows."""
    try:
        frame = encode_request(request, 7)
    except (ValueError, OverflowError, TypeError, UnicodeError, struct.error):
        return None
    try:
        return frame, parse_request(frame[4:], SERVED_VERSIONS)
    except MalformedFrame:
        return None
