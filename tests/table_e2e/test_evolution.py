"""Schema evolution through the registry: the table follows compatible changes, and an incompatible
one stops only its own topic with a clear status."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyiceberg import types as it

from tests.support.table_node import TableNode, assert_exactly_once, table_configs
from tests.support.table_producers import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]


def user_schema(version: int) -> dict[str, Any]:
    """v1 id:int, name, profile{age}; v2 + optional email; v3 + profile.city; v4 id widened to long."""
    profile_fields: list[dict[str, Any]] = [{"name": "age", "type": "int"}]
    if version >= 3:
        profile_fields.append({"name": "city", "type": ["null", "string"], "default": None})
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "long" if version >= 4 else "int"},
        {"name": "name", "type": "string"},
        {"name": "profile", "type": {"type": "record", "name": "Profile", "fields": profile_fields}},
    ]
    if version >= 2:
        fields.append({"name": "email", "type": ["null", "string"], "default": None})
    return {"type": "record", "name": "User", "namespace": "e2e.evolution", "fields": fields}


def user(version: int, i: int) -> dict[str, Any]:
    value: dict[str, Any] = {"id": i, "name": f"user-{i}", "profile": {"age": 20 + i % 50}}
    if version >= 2:
        value["email"] = f"{i}@example.com"
    if version >= 3:
        value["profile"]["city"] = f"city-{i % 3}"
    if version >= 4:
        value["id"] = (1 << 40) + i
    return value


def avro_serializer(node: TableNode, schema: dict[str, Any]) -> Any:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(node.registry(), json.dumps(schema))


def test_table_evolves_over_three_compatible_versions_and_old_rows_read_null(
    node: TableNode, topic_name: str
) -> None:
    node.create_topic(
        topic_name, table_configs(convert_value_type="by_schema_id", transform_value_type="flatten")
    )
    from tests.support.table_node import DeliveryLog

    log = DeliveryLog()
    for version in (1, 2, 3, 4):
        values = [user(version, version * 100 + i) for i in range(25)]
        produce(node, topic_name, values, avro_serializer(node, user_schema(version)), log=log)
        node.wait_committed(topic_name, log.end_offsets())

    table = node.load_table(topic_name)
    schema = table.schema()
    assert schema.find_field("id").field_type == it.LongType()
    assert schema.find_field("email").field_type == it.StringType()
    assert schema.find_field("profile.city").field_type == it.StringType()
    assert not schema.find_field("email").required
    assert len(table.schemas()) >= 3

    rows = table.scan().to_arrow().to_pylist()
    assert_exactly_once(rows, log)
    for row in rows:
        position = (row["_kafka_metadata"]["partition"], row["_kafka_metadata"]["offset"])
        sent = log.values[position]
        assert row["id"] == sent["id"]
        assert row["email"] == sent.get("email")  # None for v1 rows
        assert row["profile"]["city"] == sent["profile"].get("city")
        assert row["profile"]["age"] == sent["profile"]["age"]


def test_incompatible_change_stops_only_that_topic_with_the_reason(node: TableNode, topic_name: str) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    broken, healthy = f"{topic_name}_bad", f"{topic_name}_ok"
    for name in (broken, healthy):
        node.create_topic(
            name, table_configs(convert_value_type="by_schema_id", transform_value_type="flatten")
        )
    v1 = {
        "type": "record",
        "name": "Item",
        "fields": [{"name": "id", "type": "int"}, {"name": "code", "type": "string"}],
    }
    log = produce(node, broken, [{"id": i, "code": str(i)} for i in range(10)], avro_serializer(node, v1))
    node.wait_committed(broken, log.end_offsets())

    # string -> int is no evolution Iceberg can make; the registry is told not to object.
    registry: SchemaRegistryClient = node.registry()
    registry.set_compatibility(subject_name=f"{broken}-value", level="NONE")
    bad = {**v1, "fields": [{"name": "id", "type": "int"}, {"name": "code", "type": "int"}]}
    produce(node, broken, [{"id": 100 + i, "code": i} for i in range(5)], avro_serializer(node, bad))

    status = node.wait_status(broken, lambda s: s["state"] == "FAILED", 120, "state FAILED")
    assert status["last_error"] and "code" in status["last_error"], status
    commits = status["commits"]

    # The other table topic keeps committing while the broken one stays stopped (no crash loop).
    ok_log = produce(node, healthy, [{"id": i, "code": str(i)} for i in range(20)], avro_serializer(node, v1))
    node.wait_committed(healthy, ok_log.end_offsets())
    # A second commit of the healthy topic proves the coordinator went round again meanwhile.
    more_rows = [{"id": 20 + i, "code": str(i)} for i in range(5)]
    more = produce(node, healthy, more_rows, avro_serializer(node, v1))
    node.wait_committed(healthy, more.end_offsets())
    after = node.table_status(broken)
    assert after is not None
    assert after["state"] == "FAILED" and after["commits"] == commits
    assert after["committed_offsets"] == {"0": 10}
    assert node.alive
    assert len(node.rows(healthy)) == 25
