"""Every API the broker advertises, at every version from kio's minimum to our maximum, turns a
request into a response that encodes: no handler may trip over a field one version lacks."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema

from tabletopic.broker.protocol import build_entity
from tabletopic.broker.protocol.versions import MAX_VERSIONS, advertised_ranges
from tests.broker.helpers import call

SASL_KEYS = {17, 36}  # answered by the connection's SASL state machine, tested in test_sasl.py
CASES = [
    (key, version)
    for key, low, high in advertised_ranges(MAX_VERSIONS)
    if key not in SASL_KEYS
    for version in range(low, high + 1)
]


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{k}v{v}" for k, v in CASES])
async def test_minimal_request_gets_an_encodable_response(broker_service, api_key: int, version: int) -> None:
    await broker_service.topics.create("t", 2)
    broker_service.api_ranges = advertised_ranges(MAX_VERSIONS)
    request = build_entity(load_request_schema(api_key, version), {})
    response = await call(broker_service, request)
    if api_key == 0:
        assert response is None or response.responses == ()
    else:
        assert response is not None
