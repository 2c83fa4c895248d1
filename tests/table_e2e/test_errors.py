"""Poison records under each ``automq.table.topic.errors.tolerance``."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.support.schemas import avro_record
from tests.support.table_node import DeliveryLog, TableNode, table_configs, table_positions
from tests.support.table_producers import avro_bytes, produce_bytes

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

ITEM = avro_record("Item", {"id": "int", "label": "string"})
NOT_AN_ENVELOPE = avro_record("Plain", {"id": "int"})
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "fields": [
        {"name": "before", "type": ["null", ITEM], "default": None},
        {"name": "after", "type": ["null", "Item"], "default": None},
        {"name": "op", "type": "string"},
    ],
}
POISON = b"\x00\x00\x00\xff\xffnot avro at all"  # a schema id nobody registered


def values_with_poison(node: TableNode, topic: str, poison_at: int, count: int = 20) -> list[bytes]:
    values = [avro_bytes(node, topic, ITEM, {"id": i, "label": f"l{i}"}) for i in range(count)]
    values[poison_at] = POISON
    return values


def test_tolerance_none_stops_the_topic_naming_the_offset(node: TableNode, topic_name: str) -> None:
    node.create_topic(
        topic_name,
        table_configs(
            convert_value_type="by_schema_id", transform_value_type="flatten", errors_tolerance="none"
        ),
    )
    produce_bytes(node, topic_name, values_with_poison(node, topic_name, poison_at=7))
    status = node.wait_status(topic_name, lambda s: s["state"] == "FAILED", 120, "state FAILED")
    assert "offset 7" in status["last_error"], status
    assert status["commits"] == 0 and status["committed_offsets"] in ({}, {"0": 0})
    time.sleep(2)  # the subject: watching that nothing is committed after the failure
    assert node.table_status(topic_name)["commits"] == 0  # type: ignore[index]


def consume_all(node: TableNode, topic: str, expected: int, timeout: float = 60) -> list[Any]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": f"dlq-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    messages: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                messages.append(msg)
    finally:
        consumer.close()
    return messages


def test_tolerance_invalid_data_skips_the_poison_into_the_dlq_with_reason_headers(
    node: TableNode, topic_name: str
) -> None:
    dlq = f"{topic_name}_dlq"
    node.create_topic(dlq, {})
    node.create_topic(
        topic_name,
        table_configs(
            convert_value_type="by_schema_id",
            transform_value_type="flatten",
            errors_tolerance="invalid_data",
            errors_dlq_topic=dlq,
        ),
    )
    log = produce_bytes(node, topic_name, values_with_poison(node, topic_name, poison_at=4))
    status = node.wait_committed(topic_name, log.end_offsets())
    assert status["records_skipped"] == 1
    rows = node.rows(topic_name)
    assert sorted(table_positions(rows)) == sorted(log.acked - {(0, 4)})

    (dead,) = consume_all(node, dlq, expected=1)
    assert dead.value() == POISON
    assert dead.key() == b"4"
    headers = dict(dead.headers())
    assert headers["tabletopic.error.topic"] == topic_name.encode()
    assert headers["tabletopic.error.offset"] == b"4"
    assert headers["tabletopic.error.partition"] == b"0"
    assert headers["tabletopic.error.reason"]


def test_tolerance_all_skips_undecodable_and_unconvertible_records(node: TableNode, topic_name: str) -> None:
    node.create_topic(
        topic_name,
        table_configs(
            convert_value_type="by_schema_id",
            transform_value_type="flatten_debezium",
            errors_tolerance="all",
        ),
    )
    values = [
        avro_bytes(node, topic_name, ENVELOPE, {"before": None, "after": {"id": i, "label": "x"}, "op": "c"})
        for i in range(12)
    ]
    values[3] = POISON  # cannot be decoded (invalid data)
    # decodes fine but is no Debezium envelope: a conversion failure only `all` skips
    values[8] = avro_bytes(node, f"{topic_name}_plain", NOT_AN_ENVELOPE, {"id": 8})
    log = DeliveryLog()
    produce_bytes(node, topic_name, values, log=log)
    status = node.wait_committed(topic_name, log.end_offsets())
    assert status["records_skipped"] == 2
    rows = node.rows(topic_name)
    assert sorted(table_positions(rows)) == sorted(log.acked - {(0, 3), (0, 8)})
    assert {r["id"] for r in rows} == set(range(12)) - {3, 8}
