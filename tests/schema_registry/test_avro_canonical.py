"""Avro schemas are stored and answered in the form Java's ``Schema.toString()`` prints, as
Confluent stores them, so key order and whitespace alone never make a new schema or version."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from tabletopic.schema_registry.formats.avro import FORMAT
from tabletopic.schema_registry.formats.avro_canonical import java_form

RECORD = {
    "type": "record",
    "name": "Order",
    "namespace": "com.acme",
    "doc": "an order",
    "fields": [
        {"name": "id", "type": "long", "doc": "key"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "DONE"]}},
        {"name": "previous", "type": ["null", "Status"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "tags", "type": {"type": "array", "items": {"type": "string"}}, "default": []},
    ],
}
SHUFFLED = (
    '{ "fields" : [ {"type": {"type": "long"}, "doc": "key", "name": "id"},\n'
    '  {"type": {"symbols": ["NEW", "DONE"], "name": "com.acme.Status", "type": "enum"}, "name": "status"},\n'
    '  {"default": null, "name": "previous", "type": ["null", "com.acme.Status"]},\n'
    '  {"name": "amount", "type": {"logicalType": "decimal", "type": "bytes", "precision": 9, "scale": 2}},\n'
    '  {"name": "tags", "default": [], "type": {"items": "string", "type": "array"}} ],\n'
    '  "doc": "an order", "name": "Order", "type": "record", "namespace": "com.acme" }'
)
CANONICAL = (
    '{"type":"record","name":"Order","namespace":"com.acme","doc":"an order","fields":['
    '{"name":"id","type":"long","doc":"key"},'
    '{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","DONE"]}},'
    '{"name":"previous","type":["null","Status"],"default":null},'
    '{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},'
    '{"name":"tags","type":{"type":"array","items":"string"},"default":[]}]}'
)


def test_key_order_whitespace_and_spelled_out_names_print_the_same() -> None:
    assert FORMAT.parse(json.dumps(RECORD), {}).canonical() == CANONICAL
    assert FORMAT.parse(SHUFFLED, {}).canonical() == CANONICAL


def test_namespace_is_written_only_where_it_changes() -> None:
    inner = {"type": "fixed", "name": "other.Hash", "size": 4}
    nameless = {"type": "record", "name": "Bare", "namespace": "", "fields": []}
    schema = {
        "type": "record",
        "name": "a.R",
        "fields": [{"name": "h", "type": inner}, {"name": "b", "type": nameless}],
    }
    printed = java_form(schema)
    assert printed["namespace"] == "a"
    assert printed["fields"][0]["type"] == {"type": "fixed", "name": "Hash", "namespace": "other", "size": 4}
    assert printed["fields"][1]["type"]["namespace"] == ""


def test_field_order_and_other_properties_keep_their_place() -> None:
    field: dict[str, Any] = {
        "x-tag": 1,
        "order": "descending",
        "aliases": ["old"],
        "name": "f",
        "type": "int",
    }
    printed = java_form(
        {"type": "record", "name": "R", "fields": [field, {"name": "g", "type": "int", "order": "ascending"}]}
    )
    assert list(printed["fields"][0]) == ["name", "type", "order", "aliases", "x-tag"]
    assert "order" not in printed["fields"][1]


def test_a_reordered_schema_registers_as_the_same_id_and_version(api: TestClient) -> None:
    first = api.post("/subjects/o-value/versions", json={"schema": json.dumps(RECORD)})
    again = api.post("/subjects/o-value/versions", json={"schema": SHUFFLED})
    assert first.status_code == again.status_code == 200, again.text
    assert first.json() == again.json() == {"id": 1}
    assert api.get("/subjects/o-value/versions").json() == [1]
    found = api.post("/subjects/o-value", json={"schema": SHUFFLED})
    assert found.status_code == 200 and found.json()["version"] == 1
    assert api.get("/schemas/ids/1").json()["schema"] == CANONICAL
