"""Every converter end to end: confluent-kafka serializers -> ``tabletopic serve`` -> Spark ingest ->
Iceberg, read back with pyiceberg through the node's REST catalog (and once with ``tabletopic sql``).

Each test also checks exactly-once delivery: the set of (partition, offset) in the table equals the
positions the producer's delivery reports acknowledged, with no duplicates.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyiceberg import types as it

from tests.support.schemas import DEBEZIUM_ENVELOPE, TIMESTAMP_MILLIS, avro_record
from tests.support.table_node import (
    DeliveryLog,
    TableNode,
    assert_exactly_once,
    raw_table_configs,
    table_configs,
)
from tests.support.table_producers import compile_proto, produce

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

ORDER_SCHEMA = avro_record(
    "Order",
    {
        "id": "int",
        "quantity": "long",
        "price": "double",
        "item": "string",
        "paid": "boolean",
        "note": ["null", "string"],
        "address": {
            "type": "record",
            "name": "Address",
            "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
        },
        "tags": {"type": "array", "items": "string"},
        "attrs": {"type": "map", "values": "long"},
        "day": {"type": "int", "logicalType": "date"},
        "ts": TIMESTAMP_MILLIS,
        "total": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
    },
    namespace="e2e",
    defaults={"note": None},
)

EPOCH = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "quantity": 10_000_000_000 + i,
        "price": i * 1.5,
        "item": f"item-{i}",
        "paid": i % 2 == 0,
        "note": None if i % 3 else f"note {i}",
        "address": {"city": f"city-{i % 5}", "zip": 10_000 + i},
        "tags": [f"t{i}", "all"],
        "attrs": {"a": i, "b": 2 * i},
        "day": (EPOCH + dt.timedelta(days=i % 7)).date(),
        "ts": EPOCH + dt.timedelta(seconds=i),
        "total": decimal.Decimal(i) / 4 + decimal.Decimal("0.25"),
    }


def by_offset(rows: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    return {(r["_kafka_metadata"]["partition"], r["_kafka_metadata"]["offset"]): r for r in rows}


def test_avro_by_schema_id_flatten_lands_every_type_and_spark_sql_reads_it(
    node: TableNode, topic_name: str
) -> None:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    node.create_topic(
        topic_name,
        table_configs(convert_value_type="by_schema_id", transform_value_type="flatten"),
        partitions=3,
    )
    serializer = AvroSerializer(node.registry(), json.dumps(ORDER_SCHEMA))
    values = [order(i) for i in range(300)]
    log = produce(node, topic_name, values, serializer)
    node.wait_committed(topic_name, log.end_offsets())

    table = node.load_table(topic_name)
    schema = table.schema()
    expected_types = {
        "id": it.IntegerType(),
        "quantity": it.LongType(),
        "price": it.DoubleType(),
        "item": it.StringType(),
        "paid": it.BooleanType(),
        "note": it.StringType(),
        "day": it.DateType(),
        "total": it.DecimalType(10, 2),
    }
    for name, expected in expected_types.items():
        assert schema.find_field(name).field_type == expected, name
    assert isinstance(schema.find_field("ts").field_type, it.TimestamptzType | it.TimestampType)
    assert isinstance(schema.find_field("address").field_type, it.StructType)
    assert isinstance(schema.find_field("tags").field_type, it.ListType)
    assert isinstance(schema.find_field("attrs").field_type, it.MapType)
    for column in ("_kafka_key", "_kafka_header", "_kafka_metadata"):
        schema.find_field(column)

    rows = table.scan().to_arrow().to_pylist()
    assert_exactly_once(rows, log)
    for position, row in by_offset(rows).items():
        sent = log.values[position]
        assert row["_kafka_key"] == str(sent["id"])
        for name in ("id", "quantity", "price", "item", "paid", "note", "address", "tags", "day", "total"):
            assert row[name] == sent[name], (name, row[name], sent[name])
        assert row["ts"].replace(tzinfo=dt.UTC) == sent["ts"]
        assert dict(row["attrs"]) == sent["attrs"]

    # Spark SQL through `tabletopic sql`, the path a user takes.
    result = node.sql(
        f"SELECT count(*) AS n, sum(id) AS ids, max(address.city) AS city, "
        f"sum(total) AS total FROM default.{topic_name}"
    )
    assert result[0]["n"] == 300
    assert result[0]["ids"] == sum(range(300))
    assert result[0]["city"] == "city-4"
    assert decimal.Decimal(str(result[0]["total"])) == sum(v["total"] for v in values)


PROTO = """
syntax = "proto3";
package e2e.proto;

message Location {
  double lat = 1;
  double lon = 2;
}

message Reading {
  int32 id = 1;
  string sensor = 2;
  double value = 3;
  int64 counter = 4;
  bool ok = 5;
  repeated string tags = 6;
  map<string, int64> counts = 7;
  Location location = 8;
}
"""


def test_protobuf_by_schema_id_flatten(node: TableNode, topic_name: str, tmp_path: Path) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    module = compile_proto(PROTO, f"reading_{topic_name}", tmp_path / "proto")
    node.create_topic(
        topic_name, table_configs(convert_value_type="by_schema_id", transform_value_type="flatten"), 2
    )
    serializer = ProtobufSerializer(module.Reading, node.registry(), {"use.deprecated.format": False})
    values = [
        module.Reading(
            id=i,
            sensor=f"s{i % 4}",
            value=i / 8,
            counter=1 << 40 | i,
            ok=bool(i % 2),
            tags=["x", str(i)],
            counts={"n": i},
            location=module.Location(lat=i / 2, lon=-i / 2),
        )
        for i in range(120)
    ]
    log = produce(node, topic_name, values, serializer, partitions=2)
    node.wait_committed(topic_name, log.end_offsets())

    table = node.load_table(topic_name)
    schema = table.schema()
    assert schema.find_field("id").field_type == it.IntegerType()
    assert schema.find_field("counter").field_type == it.LongType()
    assert schema.find_field("value").field_type == it.DoubleType()
    assert isinstance(schema.find_field("location").field_type, it.StructType)
    assert isinstance(schema.find_field("tags").field_type, it.ListType)
    rows = table.scan().to_arrow().to_pylist()
    assert_exactly_once(rows, log)
    for position, row in by_offset(rows).items():
        sent = log.values[position]
        assert (row["id"], row["sensor"], row["value"], row["counter"]) == (
            sent.id,
            sent.sensor,
            sent.value,
            sent.counter,
        )
        assert bool(row["ok"]) == sent.ok
        assert row["tags"] == list(sent.tags)
        assert row["location"] == {"lat": sent.location.lat, "lon": sent.location.lon}
        counts = row["counts"]
        counts = dict(counts) if isinstance(counts, list) else {e["key"]: e["value"] for e in counts}
        assert counts == dict(sent.counts)


JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Payment",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "payer": {"type": "string"},
        "amount": {"type": "number"},
        "settled": {"type": "boolean"},
        "card": {
            "type": "object",
            "properties": {"brand": {"type": "string"}, "last4": {"type": "string"}},
        },
        "labels": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "payer", "amount"],
}


def test_json_schema_by_schema_id_flatten(node: TableNode, topic_name: str) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    node.create_topic(
        topic_name, table_configs(convert_value_type="by_schema_id", transform_value_type="flatten")
    )
    serializer = JSONSerializer(json.dumps(JSON_SCHEMA), node.registry())
    values = [
        {
            "id": i,
            "payer": f"p{i}",
            "amount": i + 0.5,
            "settled": i % 2 == 0,
            "card": {"brand": "visa", "last4": f"{i:04d}"},
            "labels": ["a", "b"][: i % 3],
        }
        for i in range(100)
    ]
    log = produce(node, topic_name, values, serializer)
    node.wait_committed(topic_name, log.end_offsets())

    table = node.load_table(topic_name)
    assert table.schema().find_field("id").field_type == it.LongType()
    assert table.schema().find_field("amount").field_type == it.DoubleType()
    rows = table.scan().to_arrow().to_pylist()
    assert_exactly_once(rows, log)
    for position, row in by_offset(rows).items():
        sent = log.values[position]
        for name in ("id", "payer", "amount", "settled", "card", "labels"):
            assert row[name] == sent[name], name


@pytest.mark.parametrize("convert", ["raw", "string"])
def test_raw_and_string_values_keep_the_payload_with_headers(
    node: TableNode, topic_name: str, convert: str
) -> None:
    node.create_topic(topic_name, table_configs(convert_value_type=convert), partitions=2)
    values = [f"payload {i} ünïcode".encode() for i in range(150)]
    log = produce(
        node, topic_name, values, partitions=2, headers=lambda i: [("h", str(i).encode()), ("src", b"e2e")]
    )
    node.wait_committed(topic_name, log.end_offsets())
    table = node.load_table(topic_name)
    expected_type = it.BinaryType() if convert == "raw" else it.StringType()
    assert table.schema().find_field("_kafka_value").field_type == expected_type
    rows = table.scan().to_arrow().to_pylist()
    assert_exactly_once(rows, log)
    for position, row in by_offset(rows).items():
        sent = log.values[position]
        assert row["_kafka_value"] == (sent if convert == "raw" else sent.decode())
        headers = dict(row["_kafka_header"])
        assert headers["src"] == b"e2e"
        assert row["_kafka_key"] == headers["h"].decode()


def test_by_latest_schema_decodes_plain_avro_with_the_subjects_latest_version(
    node: TableNode, topic_name: str
) -> None:
    """Producers without the registry framing (plain Avro bytes) decoded with the latest schema of a
    subject the table topic names."""
    import io

    import fastavro
    from confluent_kafka.schema_registry import Schema

    schema = {
        "type": "record",
        "name": "Click",
        "fields": [{"name": "user", "type": "string"}, {"name": "n", "type": "long"}],
    }
    subject = f"{topic_name}-clicks"
    node.registry().register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    node.create_topic(
        topic_name,
        raw_table_configs(
            {
                "automq.table.topic.convert.value.type": "by_latest_schema",
                "automq.table.topic.convert.value.by_latest_schema.subject": subject,
                "automq.table.topic.transform.value.type": "flatten",
            }
        ),
    )
    parsed = fastavro.parse_schema(schema)

    def encode(value: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, value)
        return out.getvalue()

    records = [{"user": f"u{i}", "n": i * 7} for i in range(80)]
    log = DeliveryLog()
    produce(node, topic_name, [encode(r) for r in records], log=log)
    node.wait_committed(topic_name, log.end_offsets())
    rows = node.rows(topic_name)
    assert_exactly_once(rows, log)
    decoded = {(r["user"], r["n"]) for r in rows}
    assert decoded == {(r["user"], r["n"]) for r in records}


def debezium_events() -> list[dict[str, Any]]:
    source = {"db": "inventory", "table": "customers"}
    events = []
    for i in range(20):
        events.append({"before": None, "after": {"id": i, "email": f"{i}@a"}, "op": "c", "ts_ms": i})
    for i in range(0, 20, 2):
        events.append(
            {
                "before": {"id": i, "email": f"{i}@a"},
                "after": {"id": i, "email": f"{i}@b"},
                "op": "u",
                "ts_ms": 100 + i,
            }
        )
    for i in range(0, 20, 5):
        events.append({"before": {"id": i, "email": f"{i}@b"}, "after": None, "op": "d", "ts_ms": 200 + i})
    return [{**e, "source": source} for e in events]


@pytest.mark.parametrize("encoding", ["avro", "json"])
def test_flatten_debezium_appends_row_images_with_cdc_ops(
    node: TableNode, topic_name: str, encoding: str
) -> None:
    node.create_topic(
        topic_name,
        table_configs(convert_value_type="by_schema_id", transform_value_type="flatten_debezium"),
    )
    if encoding == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        serializer: Any = AvroSerializer(node.registry(), json.dumps(DEBEZIUM_ENVELOPE))
    else:
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        row = {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "email": {"type": "string"}},
        }
        nullable_row = {"oneOf": [{"type": "null"}, row]}
        envelope = {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Envelope",
            "type": "object",
            "properties": {
                "before": nullable_row,
                "after": nullable_row,
                "source": {
                    "type": "object",
                    "properties": {"db": {"type": "string"}, "table": {"type": "string"}},
                },
                "op": {"type": "string"},
                "ts_ms": {"type": "integer"},
            },
            "required": ["op"],
        }
        serializer = JSONSerializer(json.dumps(envelope), node.registry())
    events = debezium_events()
    log = produce(
        node, topic_name, events, serializer, key=lambda i, e: str((e["after"] or e["before"])["id"])
    )
    node.wait_committed(topic_name, log.end_offsets())
    rows = node.rows(topic_name)
    assert_exactly_once(rows, log)
    ops = Counter(r["_cdc"]["op"] for r in rows)
    assert ops == {"I": 20, "U": 10, "D": 4}
    for position, row in by_offset(rows).items():
        sent = log.values[position]
        image = sent["before"] if sent["op"] == "d" else sent["after"]
        assert (row["id"], row["email"]) == (image["id"], image["email"])
        assert row["_cdc"]["ts"] == sent["ts_ms"]
        assert "customers" in row["_cdc"]["source"]
