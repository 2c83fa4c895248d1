"""The REST catalog against hostile requests (issue 29): roles decided by route, table names and
locations kept inside the warehouse, and bad input answered with 400 in Iceberg's error shape.

The catalog app is served over a real socket behind the node's own authentication middleware and
driven with httpx."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tabletopic.catalog.component import rest_app_for
from tabletopic.catalog.rest.embedded import EmbeddedRestCatalog
from tabletopic.http_auth import ICEBERG_REST, HttpAuthenticator, Tokens
from tests.support.catalog_fixtures import CatalogFactory

pytestmark = pytest.mark.timeout(120)

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}],
}
USERS = {"writer": "w-pw", "reader": "r-pw"}


@dataclass
class SecuredCatalog:
    uri: str
    data_dir: Path

    def client(self, user: str) -> httpx.Client:
        return httpx.Client(base_url=self.uri + "/v1", auth=(user, USERS[user]), timeout=30)


@pytest.fixture
def secured(make_catalog: CatalogFactory, tmp_path: Path) -> Iterator[SecuredCatalog]:
    data_dir = tmp_path / "node"
    handle = make_catalog({"data.dir": str(data_dir)})
    authenticator = HttpAuthenticator(
        lambda user, password: USERS.get(user) == password, {"writer"}, "test", Tokens(b"k" * 32, 60)
    )
    app = authenticator.wrap(rest_app_for(handle.backing, handle.spec), ICEBERG_REST)
    with EmbeddedRestCatalog(app) as server:
        yield SecuredCatalog(server.uri, data_dir)


@pytest.fixture
def writer(secured: SecuredCatalog) -> Iterator[httpx.Client]:
    with secured.client("writer") as client:
        assert client.post("/namespaces", json={"namespace": ["probe"]}).status_code == 200
        yield client


def assert_bad_request(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["type"] == "BadRequestException" and body["error"]["code"] == 400
    return dict(body["error"])


def test_read_only_user_cannot_commit_to_a_table_named_metrics(
    secured: SecuredCatalog, writer: httpx.Client
) -> None:
    created = writer.post("/namespaces/probe/tables", json={"name": "metrics", "schema": SCHEMA})
    assert created.status_code == 200, created.text
    update = {"updates": [{"action": "set-properties", "updates": {"owner": "mallory"}}]}
    with secured.client("reader") as reader:
        refused = reader.post("/namespaces/probe/tables/metrics", json=update)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "ForbiddenException"
        # The metrics report of that same table still only reads.
        report = reader.post("/namespaces/probe/tables/metrics/metrics", json={"report-type": "scan-report"})
        assert report.status_code == 204
    assert "owner" not in writer.get("/namespaces/probe/tables/metrics").json()["metadata"]["properties"]
    assert writer.post("/namespaces/probe/tables/metrics", json=update).status_code == 200


def files_outside(data_dir: Path) -> list[Path]:
    """Files under the test's directory but outside the node's data directory."""
    return [p for p in data_dir.parent.rglob("*") if p.is_file() and data_dir not in p.parents]


@pytest.mark.parametrize(
    "name", ["../../../escape-table", "probe/../../x", "..", ".", "a\\b", "a\x00b", "t" * 300]
)
def test_table_names_that_are_not_one_path_component_are_refused(
    secured: SecuredCatalog, writer: httpx.Client, name: str
) -> None:
    assert_bad_request(writer.post("/namespaces/probe/tables", json={"name": name, "schema": SCHEMA}))
    assert files_outside(secured.data_dir) == []


def test_create_transaction_and_rename_refuse_escaping_names(
    secured: SecuredCatalog, writer: httpx.Client
) -> None:
    staged = {"requirements": [{"type": "assert-create"}], "updates": []}
    assert_bad_request(writer.post("/namespaces/probe/tables/%2E%2E", json=staged))
    assert writer.post("/namespaces/probe/tables", json={"name": "t", "schema": SCHEMA}).status_code == 200
    rename = {
        "source": {"namespace": ["probe"], "name": "t"},
        "destination": {"namespace": ["probe"], "name": "../../moved"},
    }
    assert_bad_request(writer.post("/tables/rename", json=rename))
    assert files_outside(secured.data_dir) == []


def test_locations_outside_the_warehouse_are_refused(secured: SecuredCatalog, writer: httpx.Client) -> None:
    elsewhere = (secured.data_dir.parent / "elsewhere").as_uri()
    warehouse = (secured.data_dir / "warehouse").as_uri()
    for body in (
        {"location": elsewhere},
        {"location": warehouse + "/../../elsewhere"},
        {"location": warehouse + "-sibling/t"},
        {"properties": {"write.metadata.path": elsewhere}},
    ):
        assert_bad_request(
            writer.post("/namespaces/probe/tables", json={"name": "t", "schema": SCHEMA, **body})
        )
    namespace = {"namespace": ["elsewhere"], "properties": {"location": elsewhere}}
    assert_bad_request(writer.post("/namespaces", json=namespace))
    assert_bad_request(writer.post("/namespaces/probe/properties", json={"updates": {"location": elsewhere}}))
    inside = writer.post(
        "/namespaces/probe/tables", json={"name": "t", "schema": SCHEMA, "location": warehouse + "/custom/t"}
    )
    assert inside.status_code == 200, inside.text
    for update in (
        {"action": "set-location", "location": elsewhere},
        {"action": "set-properties", "updates": {"write.metadata.path": elsewhere}},
    ):
        assert_bad_request(writer.post("/namespaces/probe/tables/t", json={"updates": [update]}))
    metadata = secured.data_dir / "metadata.db"
    register = {"name": "r", "metadata-location": metadata.as_uri()}
    refused = assert_bad_request(writer.post("/namespaces/probe/register", json=register))
    assert "not inside the warehouse" in refused["message"]
    assert files_outside(secured.data_dir) == []


def test_purge_deletes_nothing_outside_the_warehouse(secured: SecuredCatalog, writer: httpx.Client) -> None:
    victim = secured.data_dir / "victim.txt"
    victim.write_text("keep me")
    assert writer.post("/namespaces/probe/tables", json={"name": "t", "schema": SCHEMA}).status_code == 200
    snapshot = {
        "snapshot-id": 1,
        "sequence-number": 1,
        "timestamp-ms": 1,
        "manifest-list": victim.as_uri(),
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    assert_bad_request(
        writer.post(
            "/namespaces/probe/tables/t", json={"updates": [{"action": "add-snapshot", "snapshot": snapshot}]}
        )
    )
    assert writer.delete("/namespaces/probe/tables/t", params={"purgeRequested": "true"}).status_code == 204
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_json_is_a_bad_request_without_paths(
    secured: SecuredCatalog, writer: httpx.Client, depth: int
) -> None:
    nested = '{"name": "t", "schema": ' + "[" * depth + "]" * depth + "}"
    for path in ("/namespaces/probe/tables", "/namespaces", "/namespaces/probe/tables/t"):
        answer = writer.post(path, content=nested, headers={"content-type": "application/json"})
        if path.endswith("/t"):
            assert answer.status_code in (400, 404), answer.text
            continue
        error = assert_bad_request(answer)
        assert str(secured.data_dir) not in error["message"]


def test_ten_kilobyte_names_are_bad_requests_without_paths(
    secured: SecuredCatalog, writer: httpx.Client
) -> None:
    long = "n" * 10_000
    answers = [
        writer.post("/namespaces/probe/tables", json={"name": long, "schema": SCHEMA}),
        writer.post("/namespaces", json={"namespace": [long]}),
        writer.get(f"/namespaces/probe/tables/{long}"),
        writer.get(f"/namespaces/{long}"),
    ]
    for answer in answers:
        assert str(secured.data_dir) not in assert_bad_request(answer)["message"]
