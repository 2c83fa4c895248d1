"""Confluent API parity beyond the basics: data contracts (``metadata``, ``ruleSet``) stored and
answered, ``/subjects/{s}/metadata``, ``/schemas/guids/{guid}``, contexts and ``/exporters``."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from tabletopic.schema_registry.model import fingerprint, guid_of

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
SCHEMA_2 = json.dumps(
    {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}],
    }
)
METADATA = {"properties": {"owner": "bob", "app": "orders"}, "tags": {"R.a": ["PII"]}}
RULE_SET = {
    "domainRules": [
        {"name": "positive", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "message.a > 0"}
    ]
}


def post(api: TestClient, path: str, body: dict[str, Any]) -> Any:
    return api.post(path, json=body)


def error_of(response: Any, status: int, code: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return str(body["message"])


def test_metadata_and_rule_set_are_stored_and_answered(api: TestClient) -> None:
    registered = post(
        api, "/subjects/c-value/versions", {"schema": SCHEMA, "metadata": METADATA, "ruleSet": RULE_SET}
    )
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]
    for path in ("/subjects/c-value/versions/latest", f"/schemas/ids/{schema_id}"):
        body = api.get(path).json()
        assert body["metadata"] == METADATA
        assert body["ruleSet"] == RULE_SET
    found = post(api, "/subjects/c-value", {"schema": SCHEMA, "metadata": METADATA, "ruleSet": RULE_SET})
    assert found.json()["version"] == 1 and found.json()["ruleSet"] == RULE_SET
    # Clients send empty members back ("sensitive": []): still the same contract.
    echoed = {**METADATA, "sensitive": [], "tags": {**METADATA["tags"], "other": []}}
    again = post(api, "/subjects/c-value", {"schema": SCHEMA, "metadata": echoed, "ruleSet": RULE_SET})
    assert again.status_code == 200 and again.json()["version"] == 1


def test_another_contract_is_another_schema_and_a_bare_schema_keeps_the_contract(api: TestClient) -> None:
    first = post(api, "/subjects/c-value/versions", {"schema": SCHEMA, "ruleSet": RULE_SET}).json()["id"]
    # The serializer re-registers the bare schema: it is the one already registered, contract and all.
    assert post(api, "/subjects/c-value/versions", {"schema": SCHEMA}).json()["id"] == first
    assert post(api, "/subjects/c-value", {"schema": SCHEMA}).json()["version"] == 1
    # A new version sent without a contract inherits the latest one, as in Confluent.
    second = post(api, "/subjects/c-value/versions", {"schema": SCHEMA_2}).json()["id"]
    assert api.get(f"/schemas/ids/{second}").json()["ruleSet"] == RULE_SET
    other = post(api, "/subjects/d-value/versions", {"schema": SCHEMA, "metadata": METADATA}).json()["id"]
    assert other not in (first, second)
    plain = post(api, "/subjects/e-value/versions", {"schema": SCHEMA}).json()["id"]
    assert plain not in (first, second, other)
    assert "ruleSet" not in api.get(f"/schemas/ids/{plain}").json()


def test_malformed_rule_sets_are_refused_with_confluent_codes(api: TestClient) -> None:
    bad_mode = {"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "UPGRADE"}]}
    error_of(post(api, "/subjects/c-value/versions", {"schema": SCHEMA, "ruleSet": bad_mode}), 422, 42210)
    bad_kind = {"migrationRules": [{"name": "r", "kind": "MAYBE", "mode": "UPGRADE"}]}
    error_of(post(api, "/subjects/c-value/versions", {"schema": SCHEMA, "ruleSet": bad_kind}), 422, 42210)
    twice = {"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE"}] * 2}
    error_of(post(api, "/subjects/c-value/versions", {"schema": SCHEMA, "ruleSet": twice}), 422, 42210)
    error_of(post(api, "/subjects/c-value/versions", {"schema": SCHEMA, "ruleSet": [1]}), 422, 42201)
    error_of(
        post(api, "/subjects/c-value/versions", {"schema": SCHEMA, "metadata": {"properties": 3}}), 422, 42201
    )
    assert api.get("/subjects").json() == []


def test_latest_with_metadata_picks_the_newest_matching_version(api: TestClient) -> None:
    error_of(api.get("/subjects/m-value/metadata?key=owner&value=bob"), 404, 40401)
    post(api, "/subjects/m-value/versions", {"schema": SCHEMA, "metadata": METADATA})
    post(
        api, "/subjects/m-value/versions", {"schema": SCHEMA_2, "metadata": {"properties": {"owner": "eve"}}}
    )
    assert api.get("/subjects/m-value/metadata?key=owner&value=bob").json()["version"] == 1
    assert api.get("/subjects/m-value/metadata?key=owner&value=eve").json()["version"] == 2
    assert (
        api.get("/subjects/m-value/metadata?key=owner&value=bob&key=app&value=orders").json()["version"] == 1
    )
    error_of(api.get("/subjects/m-value/metadata?key=owner&value=mallory"), 404, 40403)
    assert api.delete("/subjects/m-value/versions/1").status_code == 200
    error_of(api.get("/subjects/m-value/metadata?key=owner&value=bob"), 404, 40403)
    assert api.get("/subjects/m-value/metadata?key=owner&value=bob&deleted=true").json()["version"] == 1


def test_schemas_are_found_by_guid(api: TestClient) -> None:
    schema_id = post(api, "/subjects/g-value/versions", {"schema": SCHEMA, "ruleSet": RULE_SET}).json()["id"]
    contract = json.dumps({"ruleSet": RULE_SET}, separators=(",", ":"), sort_keys=True)
    stored = api.get(f"/schemas/ids/{schema_id}").json()["schema"]
    guid = guid_of(fingerprint("AVRO", stored, (), contract))
    body = api.get(f"/schemas/guids/{guid}").json()
    assert body["schema"] == stored and body["guid"] == guid and body["ruleSet"] == RULE_SET
    assert api.get(f"/schemas/guids/{guid}/ids").json() == [{"context": ".", "id": schema_id}]
    error_of(api.get("/schemas/guids/00000000-0000-0000-0000-000000000000"), 404, 40403)
    error_of(api.get("/schemas/guids/not-a-guid"), 404, 40403)


def test_contexts_are_listed_from_qualified_subjects(api: TestClient) -> None:
    assert api.get("/contexts").json() == ["."]
    assert post(api, "/subjects/:.team:orders-value/versions", {"schema": SCHEMA}).status_code == 200
    assert api.get("/contexts").json() == [".", ".team"]
    assert ":.team:orders-value" in api.get("/subjects").json()
    assert api.get("/subjects?subjectPrefix=:.team:").json() == [":.team:orders-value"]
    assert api.get("/subjects/:.team:orders-value/versions/1").json()["subject"] == ":.team:orders-value"
    error_of(api.delete("/contexts/.team"), 422, 42211)
    assert api.delete("/contexts/.empty").status_code == 204


def test_exporters_answer_not_supported_in_confluent_shape(api: TestClient) -> None:
    for method, path in (("GET", "/exporters"), ("POST", "/exporters"), ("GET", "/exporters/x/status")):
        message = error_of(api.request(method, path, json={}), 404, 404)
        assert "not supported" in message


def test_a_database_from_before_contracts_gains_the_column_and_keeps_its_schemas(tmp_path: Any) -> None:
    import sqlalchemy as sa

    from tabletopic import database
    from tabletopic.schema_registry import db

    engine = database.create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        database.migrate(engine, "schema_registry", db.MIGRATIONS[:1])
        with engine.begin() as conn:  # what version 1 created: no contract column
            conn.exec_driver_sql("ALTER TABLE sr_schemas DROP COLUMN contract")
            conn.exec_driver_sql(
                "INSERT INTO sr_schemas (id, schema_type, schema, refs, fingerprint) "
                "VALUES (1, 'AVRO', '\"int\"', '[]', 'f')"
            )
        assert database.migrate(engine, "schema_registry", db.MIGRATIONS) == len(db.MIGRATIONS)
        with engine.begin() as conn:
            row = db.schema_by_id(conn, 1)
            assert row is not None and row.contract == "" and row.schema == '"int"'
            assert "contract" in {c["name"] for c in sa.inspect(conn).get_columns("sr_schemas")}
    finally:
        engine.dispose()


def test_each_context_counts_its_own_ids(api: TestClient) -> None:
    other = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "b", "type": "string"}]})
    assert post(api, "/subjects/plain-value/versions", {"schema": SCHEMA}).json() == {"id": 1}
    # The first schema of a context is its id 1 too, even one the default context already holds.
    assert post(api, "/subjects/:.team:orders-value/versions", {"schema": other}).json() == {"id": 1}
    assert post(api, "/subjects/:.team:again-value/versions", {"schema": SCHEMA}).json() == {"id": 2}
    assert post(api, "/subjects/:.lab:x-value/versions", {"schema": SCHEMA}).json() == {"id": 1}
    # An id is read in the context of the subject named with it.
    assert json.loads(api.get("/schemas/ids/1").json()["schema"]) == json.loads(SCHEMA)
    in_team = api.get("/schemas/ids/1", params={"subject": ":.team:orders-value"}).json()
    assert json.loads(in_team["schema"]) == json.loads(other)
    assert api.get("/schemas/ids/2").status_code == 404
    assert api.get("/schemas/ids/1/subjects", params={"subject": ":.team:"}).json() == [":.team:orders-value"]
    assert api.get("/subjects/:.team:again-value/versions/1").json()["id"] == 2
    error_of(api.get("/schemas/ids/1", params={"subject": ":.nowhere:s"}), 404, 40403)


def test_base_context_paths_work_like_qualified_subjects(api: TestClient) -> None:
    base = "/contexts/.team"
    assert post(api, f"{base}/subjects/orders-value/versions", {"schema": SCHEMA}).json() == {"id": 1}
    assert api.get("/subjects").json() == [":.team:orders-value"]
    assert api.get(f"{base}/subjects").json() == [":.team:orders-value"]
    assert api.get(f"{base}/subjects/orders-value/versions").json() == [1]
    assert api.get(f"{base}/schemas/ids/1").status_code == 200
    assert api.get("/schemas/ids/1").status_code == 404  # nothing in the default context
    # The context's own level applies to its subjects before the global one.
    assert api.put(f"{base}/config", json={"compatibility": "NONE"}).status_code == 200
    assert api.get("/config/:.team:").json() == {"compatibilityLevel": "NONE"}
    breaking = json.dumps({"type": "record", "name": "R", "fields": [{"name": "z", "type": "int"}]})
    check = post(api, f"{base}/compatibility/subjects/orders-value/versions/latest", {"schema": breaking})
    assert check.json() == {"is_compatible": True}
    assert post(api, "/compatibility/subjects/plain/versions", {"schema": breaking}).json() == {
        "is_compatible": True
    }
    assert post(api, f"{base}/subjects/orders-value/versions", {"schema": breaking}).json() == {"id": 2}
    assert api.get("/contexts").json() == [".", ".team"]
