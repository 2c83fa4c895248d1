"""``GET /schemas/ids/{id}`` is answered before FastAPI from a cache of rendered answers: the bytes
must be the app's own, and a permanently deleted schema must stop being served."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
RULE_SET = {"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE", "expr": "true"}]}


def test_fast_answers_match_the_app_byte_for_byte(api: TestClient) -> None:
    schema_id = api.post("/subjects/f-value/versions", json={"schema": SCHEMA, "ruleSet": RULE_SET}).json()[
        "id"
    ]
    fast = api.get(f"/schemas/ids/{schema_id}")
    again = api.get(f"/schemas/ids/{schema_id}?subject=f-value")  # a cache hit
    # fetchMaxId is not a fast-path parameter: the app itself answers this one.
    slow = api.get(f"/schemas/ids/{schema_id}?fetchMaxId=false")
    assert fast.status_code == again.status_code == slow.status_code == 200
    assert fast.content == again.content == slow.content
    assert fast.headers["content-type"] == slow.headers["content-type"]
    assert json.loads(fast.content)["ruleSet"] == RULE_SET


def test_unknown_and_malformed_ids_get_the_apps_errors(api: TestClient) -> None:
    for path in ("/schemas/ids/999", "/schemas/ids/0", "/schemas/ids/x", "/schemas/ids/99999999999"):
        response = api.get(path)
        assert response.status_code == 404 and response.json()["error_code"] == 40403, path


def test_a_permanently_deleted_schema_is_no_longer_served(api: TestClient) -> None:
    schema_id = api.post("/subjects/d-value/versions", json={"schema": SCHEMA}).json()["id"]
    assert api.get(f"/schemas/ids/{schema_id}").status_code == 200
    assert api.delete("/subjects/d-value/versions/1").status_code == 200
    assert api.get(f"/schemas/ids/{schema_id}").status_code == 200  # soft-deleted: still served
    assert api.delete("/subjects/d-value/versions/1?permanent=true").status_code == 200
    response = api.get(f"/schemas/ids/{schema_id}")
    assert response.status_code == 404 and response.json()["error_code"] == 40403


def test_protobuf_serialized_format_is_served_per_format(api: TestClient) -> None:
    proto = 'syntax = "proto3";\nmessage M { int32 a = 1; }\n'
    schema_id = api.post(
        "/subjects/p-value/versions", json={"schema": proto, "schemaType": "PROTOBUF"}
    ).json()["id"]
    text = api.get(f"/schemas/ids/{schema_id}").json()["schema"]
    serialized = api.get(f"/schemas/ids/{schema_id}?format=serialized").json()["schema"]
    assert "message M" in text and serialized != text
    assert api.get(f"/schemas/ids/{schema_id}").json()["schema"] == text
