"""Every API the broker advertises, at every version from kio's minimum to our maximum, turns a
request into a response that encodes: no handler may trip over a field one version lacks, and no
handler may name a response field that no version has (``build_response`` raises on those).

Each version is tried twice: with the minimal request (every array empty) and with a populated one
(every array holding one element, every string naming an existing topic, and for the group APIs
also a group with a committed offset), so the nested entities of the response are built too."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tabletopic.broker.groups.coordinator import GroupCoordinator, OffsetToCommit
from tabletopic.broker.protocol import build_entity
from tabletopic.broker.protocol.entity_fields import field_shape
from tabletopic.broker.protocol.versions import GROUP_MAX_VERSIONS, MAX_VERSIONS, advertised_ranges
from tests.support.broker_calls import call

SASL_KEYS = {17, 36}  # answered by the connection's SASL state machine, tested in test_sasl.py


def _cases(max_versions: dict[int, int]) -> list[tuple[int, int]]:
    return [
        (key, version)
        for key, low, high in advertised_ranges(max_versions)
        if key not in SASL_KEYS
        for version in range(low, high + 1)
    ]


CASES = _cases(MAX_VERSIONS)
GROUP_CASES = _cases(GROUP_MAX_VERSIONS)


def populated(entity_type: type, name: str) -> Any:
    """An entity with one element in every array and ``name`` in every string, recursively."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(entity_type):
        shape = field_shape(field)
        if shape.is_entity:
            value: Any = populated(shape.type_, name)
        elif isinstance(shape.type_, type) and issubclass(shape.type_, str):
            value = name
        else:
            continue  # neutral value
        values[field.name] = (value,) if shape.is_array else value
    return build_entity(entity_type, values)


def requests(api_key: int, version: int, name: str) -> list[Any]:
    schema = load_request_schema(api_key, version)
    return [build_entity(schema, {}), populated(schema, name)]


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{k}v{v}" for k, v in CASES])
async def test_minimal_request_gets_an_encodable_response(broker_service, api_key: int, version: int) -> None:
    await broker_service.topics.create("t", 2)
    broker_service.api_ranges = advertised_ranges(MAX_VERSIONS)
    minimal, full = requests(api_key, version, "t")
    response = await call(broker_service, minimal)
    if api_key == 0:
        assert response is None or response.responses == ()
    else:
        assert response is not None
    await call(broker_service, full)


@pytest.mark.parametrize(("api_key", "version"), GROUP_CASES, ids=[f"{k}v{v}" for k, v in GROUP_CASES])
async def test_group_request_gets_an_encodable_response(
    coordinator: GroupCoordinator, api_key: int, version: int
) -> None:
    # Group "orders" exists (an Empty group with a committed offset of topic "orders").
    committed = await coordinator.commit_offsets("orders", "", None, -1, [OffsetToCommit("orders", 0, 1)])
    assert set(committed.values()) == {ErrorCode.none}
    for request in requests(api_key, version, "orders"):
        assert await call(coordinator, request) is not None
