"""Garbage on purpose: random bodies, paths and query strings never earn a 500 or a non-Confluent
error body."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.config import Config
from tabletopic.schema_registry.opening import standalone_app

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
schema_like = st.fixed_dictionaries(
    {"schema": st.one_of(st.text(max_size=50), json_values.map(json.dumps))},
    optional={
        "schemaType": st.sampled_from(["AVRO", "JSON", "PROTOBUF", "avro", "", "XML"]) | json_values,
        "references": json_values,
        "id": json_values,
        "version": json_values,
    },
)
segments = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data = Path(tmp_path_factory.mktemp("fuzz"))
    config = Config({"data.dir": str(data), "schema.registry.max.request.bytes": "65536"})
    with TestClient(standalone_app(config), raise_server_exceptions=False) as http:
        http.post("/subjects/base/versions", json={"schema": '"string"'})
        yield http


def confluent_error_or_success(response: Any) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error_code", "message"}, body
        assert isinstance(body["error_code"], int) and isinstance(body["message"], str)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.one_of(schema_like, json_values),
    endpoint=st.sampled_from(
        [
            "/subjects/base/versions",
            "/subjects/base",
            "/compatibility/subjects/base/versions/latest",
            "/compatibility/subjects/base/versions",
            "/subjects/other/versions?normalize=true",
        ]
    ),
)
def test_random_json_bodies_never_fail_the_server(client: TestClient, body: Any, endpoint: str) -> None:
    confluent_error_or_success(client.post(endpoint, json=body))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_random_bytes_never_fail_the_server(client: TestClient, raw: bytes) -> None:
    confluent_error_or_success(
        client.post("/subjects/base/versions", content=raw, headers={"Content-Type": "application/json"})
    )
    confluent_error_or_success(
        client.put("/config", content=raw, headers={"Content-Type": "application/json"})
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(subject=segments, version=segments, method=st.sampled_from(["GET", "DELETE"]))
def test_random_subjects_and_versions_never_fail_the_server(
    client: TestClient, subject: str, version: str, method: str
) -> None:
    from urllib.parse import quote

    path = f"/subjects/{quote(subject, safe='')}/versions/{quote(version, safe='')}"
    confluent_error_or_success(client.request(method, path))
    confluent_error_or_success(client.get(f"/config/{quote(subject, safe='')}"))
    confluent_error_or_success(client.get(f"/schemas/ids/{quote(version, safe='')}"))
