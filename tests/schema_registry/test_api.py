"""The REST API's Confluent semantics, against the real app and a fresh SQLite database per test."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tabletopic.config import Config
from tabletopic.schema_registry.formats import loader
from tabletopic.schema_registry.opening import standalone_app


def avro(*fields: tuple[str, Any], name: str = "R", **extra: Any) -> str:
    body = [{"name": n, "type": t, **({"default": extra[n]} if n in extra else {})} for n, t in fields]
    return json.dumps({"type": "record", "name": name, "fields": body})


V1 = avro(("a", "int"))
V2 = avro(("a", "int"), ("b", "string"), b="")
BREAKING = avro(("a", "string"))


def register(api: TestClient, subject: str, schema: str, **extra: Any) -> Any:
    return api.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})


def ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def error(response: Any, status: int, code: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == code, body
    assert set(body) == {"error_code", "message"}
    return str(body["message"])


# --- registration and reads ----------------------------------------------------------------------


def test_register_returns_ids_and_versions_in_order(api: TestClient) -> None:
    assert ok(register(api, "s-value", V1)) == {"id": 1}
    assert ok(register(api, "s-value", V2)) == {"id": 2}
    assert ok(api.get("/subjects/s-value/versions")) == [1, 2]
    latest = ok(api.get("/subjects/s-value/versions/latest"))
    assert latest == {
        "subject": "s-value",
        "version": 2,
        "id": 2,
        "schema": json.dumps(json.loads(V2), separators=(",", ":")),
    }
    assert ok(api.get("/subjects/s-value/versions/-1"))["version"] == 2
    assert ok(api.get("/subjects/s-value/versions/1"))["id"] == 1
    response = api.get("/subjects/s-value/versions/1")
    assert response.headers["content-type"].startswith("application/vnd.schemaregistry.v1+json")


def test_registering_the_same_schema_again_returns_the_existing_id_and_version(api: TestClient) -> None:
    first = ok(register(api, "s", V1))
    assert ok(register(api, "s", json.dumps(json.loads(V1), indent=2))) == first
    assert ok(api.get("/subjects/s/versions")) == [1]


def test_same_schema_in_another_subject_gets_the_same_id(api: TestClient) -> None:
    assert ok(register(api, "a", V1))["id"] == ok(register(api, "b", V1))["id"]
    assert ok(api.get("/schemas/ids/1/subjects")) == ["a", "b"]
    assert ok(api.get("/schemas/ids/1/versions")) == [
        {"subject": "a", "version": 1},
        {"subject": "b", "version": 1},
    ]


def test_schema_by_id_answers_text_type_and_raw_schema(api: TestClient) -> None:
    ok(register(api, "s", V1))
    body = ok(api.get("/schemas/ids/1"))
    assert json.loads(body["schema"]) == json.loads(V1)
    assert "schemaType" not in body  # Confluent omits AVRO
    assert json.loads(api.get("/schemas/ids/1/schema").text) == json.loads(V1)
    ok(register(api, "t", V2))
    assert ok(api.get("/schemas/ids/1", params={"subject": "s", "fetchMaxId": "true"}))["maxId"] == 2
    error(api.get("/schemas/ids/99"), 404, 40403)
    error(api.get("/schemas/ids/abc"), 404, 40403)


def test_lookup_finds_the_version_holding_a_schema(api: TestClient) -> None:
    ok(register(api, "s", V1))
    ok(register(api, "s", V2))
    found = ok(api.post("/subjects/s", json={"schema": V1}))
    assert (found["subject"], found["version"], found["id"]) == ("s", 1, 1)
    error(api.post("/subjects/s", json={"schema": avro(("zzz", "int"))}), 404, 40403)
    error(api.post("/subjects/nosuch", json={"schema": V1}), 404, 40401)


def test_normalize_maps_cosmetic_variants_to_one_schema(api: TestClient) -> None:
    plain = json.dumps(
        {"type": "record", "name": "R", "namespace": "n", "fields": [{"name": "a", "type": "int"}]}
    )
    variant = json.dumps(
        {"name": "n.R", "type": "record", "fields": [{"type": {"type": "int"}, "name": "a"}]}
    )
    first = ok(api.post("/subjects/s/versions?normalize=true", json={"schema": plain}))
    assert ok(api.post("/subjects/s/versions?normalize=True", json={"schema": variant})) == first
    assert ok(api.post("/subjects/s?normalize=true", json={"schema": variant}))["version"] == 1
    error(api.post("/subjects/s", json={"schema": variant}), 404, 40403)


def test_types_contexts_root_and_metadata(api: TestClient) -> None:
    assert "AVRO" in ok(api.get("/schemas/types"))
    assert ok(api.get("/contexts")) == ["."]
    assert ok(api.get("/")) == {}
    assert "kafka-cluster" in ok(api.get("/v1/metadata/id"))["scope"]["clusters"]


def test_subject_listing_honours_prefix_and_deleted(api: TestClient) -> None:
    for subject in ("orders-value", "orders-key", "users-value"):
        ok(register(api, subject, V1))
    assert ok(api.get("/subjects")) == ["orders-key", "orders-value", "users-value"]
    assert ok(api.get("/subjects", params={"subjectPrefix": "orders"})) == ["orders-key", "orders-value"]
    ok(api.delete("/subjects/users-value"))
    assert "users-value" not in ok(api.get("/subjects"))
    assert "users-value" in ok(api.get("/subjects", params={"deleted": "true"}))
    listing = ok(api.get("/schemas", params={"subjectPrefix": "orders"}))
    assert [(s["subject"], s["version"]) for s in listing] == [("orders-key", 1), ("orders-value", 1)]


def test_subjects_with_slashes_route_on_the_raw_path(api: TestClient) -> None:
    ok(register(api, "team%2Forders%2Fvalue", V1))
    assert ok(api.get("/subjects")) == ["team/orders/value"]
    assert ok(api.get("/subjects/team%2Forders%2Fvalue/versions/1"))["subject"] == "team/orders/value"
    ok(register(api, "100%25", V1))
    assert "100%" in ok(api.get("/subjects"))
    assert ok(api.get("/subjects/100%25/versions")) == [1]


def test_associations_answer_404_in_confluent_shape(api: TestClient) -> None:
    error(
        api.get(
            "/associations/resources/-/orders", params={"resourceType": "topic", "associationType": "value"}
        ),
        404,
        40401,
    )


# --- compatibility -------------------------------------------------------------------------------


def test_incompatible_schema_is_rejected_with_409(api: TestClient) -> None:
    ok(register(api, "s", V1))
    message = error(register(api, "s", BREAKING), 409, 40901)
    assert "TYPE_MISMATCH" in message and "/fields/0/type" in message
    assert ok(api.get("/subjects/s/versions")) == [1]


def test_compatibility_endpoint_answers_with_verbose_messages(api: TestClient) -> None:
    ok(register(api, "s", V1))
    assert ok(api.post("/compatibility/subjects/s/versions/latest", json={"schema": V2})) == {
        "is_compatible": True
    }
    verdict = ok(api.post("/compatibility/subjects/s/versions/1?verbose=true", json={"schema": BREAKING}))
    assert verdict["is_compatible"] is False
    assert any("TYPE_MISMATCH" in m for m in verdict["messages"])
    assert (
        ok(api.post("/compatibility/subjects/s/versions", json={"schema": BREAKING}))["is_compatible"]
        is False
    )
    assert (
        ok(api.post("/compatibility/subjects/new/versions", json={"schema": BREAKING}))["is_compatible"]
        is True
    )
    error(api.post("/compatibility/subjects/new/versions/latest", json={"schema": V1}), 404, 40401)
    error(api.post("/compatibility/subjects/s/versions/7", json={"schema": V1}), 404, 40402)
    error(api.post("/compatibility/subjects/s/versions/zero", json={"schema": V1}), 422, 42202)


def test_deleted_versions_do_not_count_for_compatibility(api: TestClient) -> None:
    ok(register(api, "s", V1))
    ok(api.delete("/subjects/s/versions/1"))
    assert ok(register(api, "s", BREAKING)) == {"id": 2}
    assert ok(api.get("/subjects/s/versions")) == [2]


def test_transitive_level_checks_every_live_version(api: TestClient) -> None:
    ok(api.put("/config/s", json={"compatibility": "BACKWARD_TRANSITIVE"}))
    ok(register(api, "s", V1))
    ok(register(api, "s", avro(("z", "int"), z=0)))
    candidate = avro(("z", "int"), ("a", "string"), z=0, a="")
    error(register(api, "s", candidate), 409, 40901)
    ok(api.put("/config/s", json={"compatibility": "BACKWARD"}))
    assert ok(register(api, "s", candidate))["id"] == 3


# --- config and mode -----------------------------------------------------------------------------


def test_config_get_answers_compatibility_level_and_put_takes_compatibility(api: TestClient) -> None:
    assert ok(api.get("/config")) == {"compatibilityLevel": "BACKWARD"}
    assert ok(api.put("/config", json={"compatibility": "full"})) == {"compatibility": "FULL"}
    assert ok(api.get("/config")) == {"compatibilityLevel": "FULL"}
    error(api.get("/config/s"), 404, 40408)
    assert ok(api.get("/config/s", params={"defaultToGlobal": "true"})) == {"compatibilityLevel": "FULL"}
    ok(api.put("/config/s", json={"compatibility": "NONE"}))
    assert ok(api.get("/config/s")) == {"compatibilityLevel": "NONE"}
    assert ok(api.delete("/config/s")) == {"compatibilityLevel": "NONE"}
    error(api.get("/config/s"), 404, 40408)
    assert ok(api.delete("/config")) == {"compatibilityLevel": "FULL"}
    assert ok(api.get("/config")) == {"compatibilityLevel": "BACKWARD"}


@pytest.mark.parametrize("body", [{"compatibility": "SIDEWAYS"}, {"compatibility": 7}, {}, {"other": 1}])
def test_invalid_compatibility_levels_answer_42203(api: TestClient, body: Any) -> None:
    error(api.put("/config", json=body), 422, 42203)
    error(api.put("/config/s", json=body), 422, 42203)


def test_readonly_mode_blocks_writes_and_import_mode_takes_given_ids(api: TestClient) -> None:
    assert ok(api.get("/mode")) == {"mode": "READWRITE"}
    ok(api.put("/mode/s", json={"mode": "READONLY"}))
    error(register(api, "s", V1), 422, 42205)
    assert ok(api.delete("/mode/s")) == {"mode": "READONLY"}
    error(api.get("/mode/s"), 404, 40409)
    assert ok(api.get("/mode/s", params={"defaultToGlobal": "true"})) == {"mode": "READWRITE"}

    error(register(api, "imported", V1, id=100), 422, 42205)  # not in import mode
    ok(api.put("/mode/imported", json={"mode": "IMPORT"}))
    assert ok(register(api, "imported", V1, id=100, version=7)) == {"id": 100}
    assert ok(api.get("/subjects/imported/versions")) == [7]
    error(register(api, "imported", V2, id=100, version=8), 422, 42205)  # id taken by another schema
    ok(api.put("/mode/imported", json={"mode": "READWRITE"}))
    assert ok(register(api, "fresh", avro(("q", "int"))))["id"] == 101  # ids continue after imports


def test_import_mode_refuses_a_registry_with_subjects_unless_forced(api: TestClient) -> None:
    ok(register(api, "s", V1))
    error(api.put("/mode", json={"mode": "IMPORT"}), 422, 42205)
    assert ok(api.put("/mode?force=true", json={"mode": "IMPORT"})) == {"mode": "IMPORT"}
    error(api.put("/mode", json={"mode": "SOMETIMES"}), 422, 42204)
    error(api.put("/mode", json={}), 422, 42204)


# --- deletes -------------------------------------------------------------------------------------


def test_soft_then_permanent_version_delete_follows_confluent_rules(api: TestClient) -> None:
    ok(register(api, "s", V1))
    ok(register(api, "s", V2))
    error(api.delete("/subjects/s/versions/1?permanent=true"), 404, 40407)
    assert ok(api.delete("/subjects/s/versions/1")) == 1
    error(api.delete("/subjects/s/versions/1"), 404, 40406)
    error(api.get("/subjects/s/versions/1"), 404, 40402)
    assert ok(api.get("/subjects/s/versions/1", params={"deleted": "true"}))["id"] == 1
    assert ok(api.get("/subjects/s/versions", params={"deleted": "true"})) == [1, 2]
    assert ok(api.get("/schemas/ids/1"))["schema"]  # soft-deleted schemas stay readable by id
    error(api.get("/schemas/ids/1/subjects"), 404, 40403)
    assert ok(api.get("/schemas/ids/1/subjects?deleted=true")) == ["s"]
    assert ok(api.get("/schemas/ids/1/versions?deleted=true")) == [{"subject": "s", "version": 1}]
    assert ok(api.delete("/subjects/s/versions/1?permanent=true")) == 1
    error(api.get("/schemas/ids/1"), 404, 40403)
    error(api.delete("/subjects/s/versions/9"), 404, 40402)
    error(api.delete("/subjects/nosuch/versions/1"), 404, 40401)


def test_subject_delete_soft_then_permanent(api: TestClient) -> None:
    ok(register(api, "s", V1))
    ok(register(api, "s", V2))
    error(api.delete("/subjects/s?permanent=true"), 404, 40405)
    assert ok(api.delete("/subjects/s")) == [1, 2]
    error(api.delete("/subjects/s"), 404, 40404)
    error(api.get("/subjects/s/versions"), 404, 40401)
    error(api.get("/subjects/s/versions/latest"), 404, 40401)
    assert ok(api.delete("/subjects/s?permanent=true")) == [1, 2]
    assert ok(api.get("/subjects", params={"deleted": "true"})) == []
    # Ids are never reused, even after a permanent delete.
    assert ok(register(api, "s", avro(("c", "int"))))["id"] == 3
    assert ok(api.get("/subjects/s/versions")) == [1]


def test_registering_after_soft_delete_continues_the_version_numbers(api: TestClient) -> None:
    ok(register(api, "s", V1))
    ok(api.delete("/subjects/s"))
    assert ok(register(api, "s", V1)) == {"id": 1}
    assert ok(api.get("/subjects/s/versions")) == [2]


# --- references ----------------------------------------------------------------------------------

ADDRESS = json.dumps(
    {"type": "record", "name": "Address", "namespace": "acme", "fields": [{"name": "city", "type": "string"}]}
)
PERSON = json.dumps(
    {"type": "record", "name": "Person", "namespace": "acme", "fields": [{"name": "home", "type": "Address"}]}
)
PERSON_REFS = [{"name": "acme.Address", "subject": "address", "version": 1}]


def test_references_resolve_and_block_deletes_of_referenced_schemas(api: TestClient) -> None:
    ok(register(api, "address", ADDRESS))
    person_id = ok(register(api, "person", PERSON, references=PERSON_REFS))["id"]
    body = ok(api.get(f"/schemas/ids/{person_id}"))
    assert body["references"] == PERSON_REFS
    assert ok(api.get("/subjects/address/versions/1/referencedby")) == [person_id]
    error(api.delete("/subjects/address/versions/1"), 422, 42206)
    error(api.delete("/subjects/address"), 422, 42206)
    ok(api.delete("/subjects/person"))
    ok(api.delete("/subjects/address"))  # soft delete allowed once the referrer is soft-deleted
    error(api.delete("/subjects/address?permanent=true"), 422, 42206)
    ok(api.delete("/subjects/person?permanent=true"))
    assert ok(api.delete("/subjects/address?permanent=true")) == [1]


def test_missing_reference_is_an_invalid_schema(api: TestClient) -> None:
    error(register(api, "person", PERSON), 422, 42201)
    error(register(api, "person", PERSON, references=PERSON_REFS), 422, 42201)
    # A subject no database can hold (PostgreSQL refuses NUL) is missing too, not a store error.
    unstorable = [{**PERSON_REFS[0], "subject": "add\u0000ress"}]
    error(register(api, "person", PERSON, references=unstorable), 422, 42201)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "JSON"),
        (b"[]", ""),
        (b'"just a string"', ""),
        (b"{}", "schema"),
        (b'{"schema": 42}', ""),
        (b'{"schema": ""}', "empty"),
        (b'{"schema": "   "}', "empty"),
        (b'{"schema": "{\\"type\\": \\"recor"}', "JSON"),
        (b'{"schema": "{\\"type\\": \\"record\\", \\"name\\": \\"R\\"}"}', ""),
        (b'{"schema": "\\"int\\"", "schemaType": "XML"}', "XML"),
        (b'{"schema": "\\"int\\"", "schemaType": 5}', ""),
        (b'{"schema": "\\"int\\"", "references": "nope"}', ""),
        (b'{"schema": "\\"int\\"", "references": [{"name": 1}]}', ""),
        (b"\xff\xfe\x00garbage", ""),
        (b'{"schema": ' + b"[" * 20000 + b"]" * 20000 + b"}", "json"),
        (b'{"schema": ' + json.dumps("[" * 20000 + "]" * 20000).encode() + b"}", "deeply"),
    ],
)
def test_bad_register_bodies_answer_422_42201(api: TestClient, body: bytes, fragment: str) -> None:
    message = error(api.post("/subjects/s/versions", content=body), 422, 42201)
    assert fragment.lower() in message.lower()


def test_huge_bodies_are_refused_with_413(api: TestClient) -> None:
    huge = json.dumps(
        {"schema": json.dumps({"type": "record", "name": "R", "doc": "x" * 100_000, "fields": []})}
    )
    error(api.post("/subjects/s/versions", content=huge), 413, 41301)

    def chunks() -> Any:
        for _ in range(100):
            yield b" " * 4096

    error(api.post("/subjects/s/versions", content=chunks()), 413, 41301)
    ok(register(api, "s", V1))  # the server keeps serving


@pytest.mark.parametrize("version", ["abc", "0", "-2", "1.5", "2147483648", "latest2"])
def test_invalid_versions_answer_42202(api: TestClient, version: str) -> None:
    ok(register(api, "s", V1))
    error(api.get(f"/subjects/s/versions/{version}"), 422, 42202)
    error(api.delete(f"/subjects/s/versions/{version}"), 422, 42202)


def test_unknown_subjects_and_versions_answer_404s(api: TestClient) -> None:
    error(api.get("/subjects/nosuch/versions"), 404, 40401)
    error(api.get("/subjects/nosuch/versions/1"), 404, 40401)
    ok(register(api, "s", V1))
    error(api.get("/subjects/s/versions/2"), 404, 40402)
    error(api.get("/subjects/s/versions/2/schema"), 404, 40402)


def test_unknown_routes_and_methods_answer_in_confluent_shape(api: TestClient) -> None:
    error(api.get("/nope"), 404, 404)
    error(api.put("/subjects"), 405, 405)


def test_query_flags_accept_python_style_booleans(api: TestClient) -> None:
    ok(register(api, "s", V1))
    ok(api.delete("/subjects/s/versions/1"))
    assert ok(api.get("/subjects/s/versions?deleted=True")) == [1]
    error(api.get("/subjects/s/versions?deleted=maybe"), 422, 42201)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("get", "/schemas/ids/99999999999999999999", None, 404, 40403),
        ("get", "/schemas/ids/-1", None, 404, 40403),
        ("get", "/subjects/a%00b/versions", None, 422, 42208),
        ("post", "/subjects/a%00b/versions", {"schema": V1}, 422, 42208),
        ("post", "/subjects/%20/versions", {"schema": V1}, 422, 42208),
        ("post", f"/subjects/{'x' * 1025}/versions", {"schema": V1}, 422, 42208),
        ("get", "/subjects?subjectPrefix=a%00", None, 422, 42208),
        ("post", "/subjects/s/versions", {"schema": V1.replace('"R"', '"R\\u0000"')}, 422, 42201),
        ("post", "/subjects/s/versions", {"schema": V1, "id": 2**40}, 422, 42201),
        ("post", "/subjects/s/versions", {"schema": V1, "version": -7}, 422, 42201),
        (
            "post",
            "/subjects/s/versions",
            {"schema": V1, "references": [{"name": "x", "subject": "y", "version": 2**33}]},
            422,
            42201,
        ),
    ],
)
def test_out_of_range_and_unstorable_input_is_a_client_error(
    api: TestClient, method: str, path: str, body: Any, status: int, code: int
) -> None:
    error(api.request(method.upper(), path, json=body), status, code)
    ok(register(api, "s", V1))  # and the registry keeps serving


def test_stored_schemas_of_a_format_missing_on_this_node_answer_422_not_500(
    api: TestClient, registry_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(register(api, "j", json.dumps({"type": "object"}), schemaType="JSON"))
    monkeypatch.setitem(loader.FORMATS, "JSON", ("tabletopic.no_such_module:FORMAT", "jsonschema"))
    loader.forget_loaded()
    try:
        # A fresh app (empty parse caches) over the same database, as on another node.
        with TestClient(standalone_app(registry_config), raise_server_exceptions=False) as other:
            message = error(other.post("/subjects/j/versions", json={"schema": V1}), 422, 42201)
            assert "cannot be parsed" in message
            error(other.post("/subjects/j/versions", json={"schema": "{}", "schemaType": "JSON"}), 422, 42201)
            assert ok(other.get("/schemas/ids/1"))["schemaType"] == "JSON"  # plain reads still work
            assert "JSON" not in ok(other.get("/schemas/types"))
    finally:
        monkeypatch.undo()
        loader.forget_loaded()


def test_readonly_mode_refuses_even_a_repeat_registration(api: TestClient) -> None:
    assert ok(register(api, "ro", V1)) == {"id": 1}
    ok(api.put("/mode/ro", json={"mode": "READONLY"}))
    error(register(api, "ro", V1), 422, 42205)
    assert ok(api.post("/subjects/ro", json={"schema": V1}))["id"] == 1  # lookups still answer
