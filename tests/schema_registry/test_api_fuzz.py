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
from tabletopic.schema_registry.routers.setup import ROUTERS

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
rules = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.sampled_from(["r", "r", "1bad", ""]) | json_values,
            "kind": st.sampled_from(["CONDITION", "TRANSFORM", "X"]) | json_values,
            "mode": st.sampled_from(["WRITE", "READ", "UPGRADE", "DOWNGRADE", "NOPE"]) | json_values,
            "expr": json_values,
            "params": json_values,
            "tags": json_values,
        },
    ),
    max_size=3,
)
schema_like = st.fixed_dictionaries(
    {
        "schema": st.one_of(
            st.sampled_from(['"string"', '"int"']), st.text(max_size=50), json_values.map(json.dumps)
        )
    },
    optional={
        "schemaType": st.sampled_from(["AVRO", "JSON", "PROTOBUF", "avro", "", "XML"]) | json_values,
        "references": json_values,
        "id": json_values,
        "version": json_values,
        "metadata": json_values
        | st.fixed_dictionaries(
            {}, optional={"properties": json_values, "tags": json_values, "sensitive": json_values}
        ),
        "ruleSet": json_values
        | st.fixed_dictionaries({}, optional={"domainRules": rules, "migrationRules": rules | json_values}),
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


def _routes() -> list[tuple[str, str]]:
    """Every (method, path template) the app serves, from the routers it mounts."""
    found = []
    for router in ROUTERS:
        for route in router.routes:
            for method in sorted(getattr(route, "methods", None) or ()):
                if method in ("GET", "POST", "PUT", "DELETE"):
                    found.append((method, str(getattr(route, "path", ""))))
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    query=st.dictionaries(
        st.sampled_from(
            [
                "deleted",
                "normalize",
                "permanent",
                "key",
                "value",
                "format",
                "latestOnly",
                "offset",
                "limit",
                "subjectPrefix",
                "defaultToGlobal",
                "force",
                "verbose",
                "fetchMaxId",
            ]
        ),
        st.text(max_size=6) | st.sampled_from(["true", "false", "-1", "9999999999"]),
        max_size=3,
    ),
    body=st.one_of(schema_like, json_values),
)
def test_every_route_answers_garbage_with_a_confluent_error(
    client: TestClient, data: st.DataObject, query: dict[str, str], body: Any
) -> None:
    from urllib.parse import quote

    method, template = data.draw(st.sampled_from(_routes()))
    path = template
    while "{" in path:
        start, end = path.index("{"), path.index("}")
        segment = data.draw(segments | st.sampled_from(["base", "1", "latest", "-1", ".ctx"]))
        path = path[:start] + quote(segment, safe="") + path[end + 1 :]
    response = client.request(method, path, params=query, json=body if method in ("POST", "PUT") else None)
    confluent_error_or_success(response)
