"""A value PostgreSQL cannot store (a NUL in text) sent to the built-in REST catalog backed by it:
a 400 BadRequestException naming why, nothing stored, and the catalog still serving. It used to be
a 500 ServiceFailureException with a traceback in the log."""

from __future__ import annotations

import httpx
import pytest

from tests.support.catalog_fixtures import CatalogFactory

pytestmark = pytest.mark.postgres


def test_a_nul_in_a_namespace_property_answers_400_and_stores_nothing(
    make_catalog: CatalogFactory, postgres_url: str
) -> None:
    handle = make_catalog({"metadata.url": postgres_url})
    assert handle.rest is not None
    with httpx.Client(base_url=handle.rest.uri + "/v1", timeout=30) as http:
        created = http.post(
            "/namespaces", json={"namespace": ["nul_db"], "properties": {"owner": "a\u0000b"}}
        )
        assert created.status_code == 400, created.text
        error = created.json()["error"]
        assert error["type"] == "BadRequestException" and "NUL" in error["message"], error
        assert http.get("/namespaces/nul_db").status_code == 404
        assert http.post("/namespaces", json={"namespace": ["nul_db"]}).status_code == 200
