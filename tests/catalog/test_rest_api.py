"""The built-in REST catalog over HTTP: spec endpoints, paging, and the spec's error shape for bad input."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.catalog_fixtures import CatalogFactory, CatalogHandle

pytestmark = pytest.mark.timeout(120)

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "name", "required": False, "type": "string"},
    ],
}


@pytest.fixture
def catalog(make_catalog: CatalogFactory) -> CatalogHandle:
    return make_catalog()


@pytest.fixture
def http(catalog: CatalogHandle) -> Iterator[httpx.Client]:
    assert catalog.rest is not None
    with httpx.Client(base_url=catalog.rest.uri + "/v1", timeout=30) as client:
        yield client


def assert_error(response: httpx.Response, status: int, error_type: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["type"] == error_type
    assert body["error"]["code"] == status
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def create_table(http: httpx.Client, namespace: str, name: str, **extra: Any) -> httpx.Response:
    return http.post(f"/namespaces/{namespace}/tables", json={"name": name, "schema": SCHEMA, **extra})


def test_config_advertises_the_endpoints_it_serves(http: httpx.Client) -> None:
    body = http.get("/config").json()
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}" in body["endpoints"]
    assert "POST /v1/{prefix}/tables/rename" in body["endpoints"]
    assert not any("views" in endpoint for endpoint in body["endpoints"])


def test_namespace_lifecycle_with_properties_and_existence_checks(http: httpx.Client) -> None:
    created = http.post("/namespaces", json={"namespace": ["sales"], "properties": {"owner": "ann"}})
    assert created.status_code == 200
    assert created.json()["namespace"] == ["sales"]
    assert http.head("/namespaces/sales").status_code == 204
    assert http.head("/namespaces/nope").status_code == 404
    update = http.post(
        "/namespaces/sales/properties", json={"updates": {"team": "x"}, "removals": ["owner", "zz"]}
    )
    assert update.status_code == 200
    assert update.json() == {"updated": ["team"], "removed": ["owner"], "missing": ["zz"]}
    props = http.get("/namespaces/sales").json()["properties"]
    assert props["team"] == "x" and "owner" not in props
    assert http.delete("/namespaces/sales").status_code == 204
    assert_error(http.get("/namespaces/sales"), 404, "NoSuchNamespaceException")


def test_multi_level_namespaces_use_the_unit_separator(http: httpx.Client) -> None:
    assert http.post("/namespaces", json={"namespace": ["a"]}).status_code == 200
    assert http.post("/namespaces", json={"namespace": ["a", "b"]}).status_code == 200
    assert http.get("/namespaces", params={"parent": "a"}).json()["namespaces"] == [["a", "b"]]
    assert create_table(http, "a%1Fb", "t").status_code == 200
    tables = http.get("/namespaces/a%1Fb/tables").json()["identifiers"]
    assert tables == [{"namespace": ["a", "b"], "name": "t"}]
    assert http.head("/namespaces/a%1Fb/tables/t").status_code == 204


def test_listing_tables_pages_with_tokens(http: httpx.Client) -> None:
    http.post("/namespaces", json={"namespace": ["p"]})
    for i in range(5):
        assert create_table(http, "p", f"t{i}").status_code == 200
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        params: dict[str, Any] = {"pageSize": 2}
        if token:
            params["pageToken"] = token
        body = http.get("/namespaces/p/tables", params=params).json()
        seen += [ident["name"] for ident in body["identifiers"]]
        pages += 1
        token = body.get("next-page-token")
        if not token:
            break
    assert seen == [f"t{i}" for i in range(5)]
    assert pages == 3
    assert_error(http.get("/namespaces/p/tables", params={"pageToken": "bogus"}), 400, "BadRequestException")
    assert_error(http.get("/namespaces/p/tables", params={"pageSize": "abc"}), 400, "BadRequestException")


def test_unknown_namespace_and_table_answer_404_with_spec_types(http: httpx.Client) -> None:
    assert_error(http.get("/namespaces/missing/tables"), 404, "NoSuchNamespaceException")
    assert_error(create_table(http, "missing", "t"), 404, "NoSuchNamespaceException")
    http.post("/namespaces", json={"namespace": ["db"]})
    assert_error(http.get("/namespaces/db/tables/missing"), 404, "NoSuchTableException")
    assert http.head("/namespaces/db/tables/missing").status_code == 404
    # Spark probes `db.t.snapshots` as a table in namespace db.t before resolving a metadata table.
    assert_error(http.get("/namespaces/db%1Ft/tables/snapshots"), 404, "NoSuchTableException")
    assert_error(http.delete("/namespaces/db/tables/missing"), 404, "NoSuchTableException")


def test_duplicates_answer_409_already_exists(http: httpx.Client) -> None:
    http.post("/namespaces", json={"namespace": ["db"]})
    assert_error(http.post("/namespaces", json={"namespace": ["db"]}), 409, "AlreadyExistsException")
    assert create_table(http, "db", "t").status_code == 200
    assert_error(create_table(http, "db", "t"), 409, "AlreadyExistsException")
    assert_error(http.delete("/namespaces/db"), 409, "NamespaceNotEmptyException")


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"[1, 2]",
        b'{"updates": [{"action": "no-such-update"}]}',
        b'{"requirements": [{"type": "assert-table-uuid"}]}',
        b'{"updates": "not a list"}',
    ],
    ids=["garbage", "empty", "array", "unknown-update", "requirement-missing-field", "wrong-type"],
)
def test_malformed_commit_answers_400_bad_request(http: httpx.Client, body: bytes) -> None:
    http.post("/namespaces", json={"namespace": ["db"]})
    create_table(http, "db", "t")
    response = http.post(
        "/namespaces/db/tables/t", content=body, headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "BadRequestException")


def test_malformed_create_bodies_answer_400_never_422(http: httpx.Client) -> None:
    http.post("/namespaces", json={"namespace": ["db"]})
    assert_error(http.post("/namespaces/db/tables", json={"name": "t"}), 400, "BadRequestException")
    assert_error(http.post("/namespaces", json={"namespace": []}), 400, "BadRequestException")
    assert_error(http.post("/namespaces", json={"namespace": ["a.b"]}), 400, "BadRequestException")
    assert_error(http.post("/tables/rename", content=b"\xff\xfe"), 400, "BadRequestException")


def test_failed_requirement_answers_409_commit_failed(http: httpx.Client) -> None:
    http.post("/namespaces", json={"namespace": ["db"]})
    create_table(http, "db", "t")
    body = {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    assert_error(http.post("/namespaces/db/tables/t", json=body), 409, "CommitFailedException")
    body = {"requirements": [{"type": "assert-current-schema-id", "current-schema-id": 7}], "updates": []}
    assert_error(http.post("/namespaces/db/tables/t", json=body), 409, "CommitFailedException")


def test_commit_applies_updates_when_requirements_hold(http: httpx.Client) -> None:
    http.post("/namespaces", json={"namespace": ["db"]})
    table_uuid = create_table(http, "db", "t").json()["metadata"]["table-uuid"]
    body = {
        "identifier": {"namespace": ["db"], "name": "t"},
        "requirements": [{"type": "assert-table-uuid", "uuid": table_uuid}],
        "updates": [{"action": "set-properties", "updates": {"owner": "pipeline"}}],
    }
    response = http.post("/namespaces/db/tables/t", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["properties"]["owner"] == "pipeline"
    assert response.json()["metadata-location"].endswith(".metadata.json")
    loaded = http.get("/namespaces/db/tables/t").json()
    assert loaded["metadata"]["properties"]["owner"] == "pipeline"


def test_staged_create_persists_only_on_commit_with_assert_create(http: httpx.Client) -> None:
    http.post("/namespaces", json={"namespace": ["db"]})
    staged = create_table(http, "db", "s", **{"stage-create": True})
    assert staged.status_code == 200, staged.text
    assert "metadata-location" not in staged.json()
    assert http.head("/namespaces/db/tables/s").status_code == 404
    meta = staged.json()["metadata"]
    body = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": meta["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": SCHEMA, "last-column-id": 2},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": meta["location"]},
            {"action": "set-properties", "updates": {"created-by": "test"}},
        ],
    }
    committed = http.post("/namespaces/db/tables/s", json=body)
    assert committed.status_code == 200, committed.text
    assert http.head("/namespaces/db/tables/s").status_code == 204
    assert_error(http.post("/namespaces/db/tables/s", json=body), 409, "CommitFailedException")


def test_rename_drop_purge_and_metrics(catalog: CatalogHandle, http: httpx.Client) -> None:
    from pathlib import Path
    from urllib.parse import urlparse

    http.post("/namespaces", json={"namespace": ["db"]})
    http.post("/namespaces", json={"namespace": ["other"]})
    location = create_table(http, "db", "t").json()["metadata"]["location"]
    rename = {
        "source": {"namespace": ["db"], "name": "t"},
        "destination": {"namespace": ["other"], "name": "u"},
    }
    assert http.post("/tables/rename", json=rename).status_code == 204
    assert http.head("/namespaces/other/tables/u").status_code == 204
    assert_error(http.post("/tables/rename", json=rename), 404, "NoSuchTableException")
    assert (
        http.post("/namespaces/other/tables/u/metrics", json={"report-type": "scan-report"}).status_code
        == 204
    )
    metadata_dir = Path(urlparse(location).path) / "metadata"
    assert any(metadata_dir.iterdir())
    assert http.delete("/namespaces/other/tables/u", params={"purgeRequested": "true"}).status_code == 204
    assert not metadata_dir.exists() or not any(metadata_dir.iterdir())
    assert http.head("/namespaces/other/tables/u").status_code == 404


def test_unknown_route_uses_the_error_shape(http: httpx.Client) -> None:
    assert_error(http.get("/no/such/route"), 404, "NotFoundException")


def test_pyiceberg_rest_client_round_trip(catalog: CatalogHandle) -> None:
    import pyarrow as pa

    client = catalog.rest_client()
    client.create_namespace("db")
    table = client.create_table("db.t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}))
    with table.update_schema() as update:
        from pyiceberg.types import DoubleType

        update.add_column("score", DoubleType())
    reloaded = catalog.backing.load_table("db.t")
    assert reloaded.scan().to_arrow().num_rows == 2
    assert "score" in reloaded.schema().column_names


def test_register_of_unreadable_metadata_is_rejected_without_leaving_a_table(http: httpx.Client) -> None:
    http.post("/namespaces", json={"namespace": ["db"]})
    body = {"name": "r", "metadata-location": "file:///nonexistent/v1.metadata.json"}
    assert_error(http.post("/namespaces/db/register", json=body), 400, "BadRequestException")
    assert http.head("/namespaces/db/tables/r").status_code == 404


def test_internal_failure_answers_500_in_spec_shape_and_keeps_the_connection_usable(
    catalog: CatalogHandle, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    http.post("/namespaces", json={"namespace": ["db"]})

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("backend exploded")

    monkeypatch.setattr(catalog.backing, "load_table", broken)
    error = assert_error(http.get("/namespaces/db/tables/t"), 500, "ServiceFailureException")
    # The type only: an exception's text can hold the node's paths (issue 29); the log has it all.
    assert "RuntimeError" in error["message"] and "backend exploded" not in error["message"]
    # Same keep-alive connection: the server must not have dropped it.
    assert http.head("/namespaces/db").status_code == 204
