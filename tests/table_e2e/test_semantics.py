"""What a new user meets first, end to end: tombstones on upsert and append tables, ``partition.by``
naming a column that does not exist, and two topics whose names map to the same table."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.support.schemas import TIMESTAMP_MILLIS, avro_record
from tests.support.table_node import DeliveryLog, TableNode, table_configs
from tests.support.table_producers import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

ACCOUNT = avro_record("Account", {"id": "int", "owner": "string", "at": TIMESTAMP_MILLIS})
FLATTEN = {"convert_value_type": "by_schema_id", "transform_value_type": "flatten"}


def serializer(node: TableNode) -> Any:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(node.registry(), json.dumps(ACCOUNT))


def account(i: int) -> dict[str, Any]:
    return {"id": i, "owner": f"o{i}", "at": 1_700_000_000_000 + i}


def invalid_config(call: Any) -> str:
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as caught:
        call()
    error = caught.value.args[0]
    assert error.name() == "INVALID_CONFIG", error
    return str(error.str())


def test_a_tombstone_deletes_its_keys_row_on_an_upsert_table(node: TableNode, topic_name: str) -> None:
    node.create_topic(topic_name, table_configs(**FLATTEN, upsert_enable="true", id_columns="[id]"))
    log = DeliveryLog()
    ser = serializer(node)
    produce(node, topic_name, [account(i) for i in range(6)], ser, key=lambda _i, v: str(v["id"]), log=log)
    node.wait_committed(topic_name, log.end_offsets(), timeout=180)
    # Tombstones for 1 and 4 (keys are the id as text), and 4 comes back in the same batch after.
    changes: list[Any] = [None, None, account(4)]
    keys = ["1", "4", "4"]
    produce(node, topic_name, changes, ser, key=lambda i, _v: keys[i], log=log)
    status = node.wait_committed(topic_name, log.end_offsets(), timeout=180)
    assert status["state"] != "FAILED", status
    assert sorted(row["id"] for row in node.rows(topic_name)) == [0, 2, 3, 4, 5]
    # A batch of tombstones only.
    produce(node, topic_name, [None], ser, key=lambda _i, _v: "0", log=log)
    node.wait_committed(topic_name, log.end_offsets(), timeout=180)
    assert sorted(row["id"] for row in node.rows(topic_name)) == [2, 3, 4, 5]


def test_tombstones_on_an_append_table_are_skipped_and_counted(node: TableNode, topic_name: str) -> None:
    node.create_topic(topic_name, table_configs(**FLATTEN))
    log = DeliveryLog()
    produce(node, topic_name, [None, account(1), None, account(2)], serializer(node), log=log)
    status = node.wait_committed(topic_name, log.end_offsets(), timeout=180)
    assert status["state"] != "FAILED" and status["tombstones_skipped"] == 2, status
    assert sorted(row["id"] for row in node.rows(topic_name)) == [1, 2]


def test_partition_by_on_a_missing_column_is_refused_or_reported(node: TableNode, topic_name: str) -> None:
    # Schema unknown until the first commit: the topic's status says why it stopped.
    node.create_topic(topic_name, table_configs(**FLATTEN, partition_by="[day(nosuch)]"))
    produce(node, topic_name, [account(1)], serializer(node))
    status = node.wait_status(topic_name, lambda s: s["state"] == "FAILED", 180, "FAILED")
    assert "partition.by" in status["last_error"] and "nosuch" in status["last_error"]
    # Schema known (the table exists): the change is refused with INVALID_CONFIG.
    other = f"{topic_name}_b"
    node.create_topic(other, table_configs(**FLATTEN, partition_by="[day(at)]"))
    log = produce(node, other, [account(2)], serializer(node))
    node.wait_committed(other, log.end_offsets(), timeout=180)
    reason = invalid_config(
        lambda: node.alter_topic(other, {"automq.table.topic.partition.by": "[day(nosuch)]"})
    )
    assert "automq.table.topic.partition.by" in reason and "nosuch" in reason


def test_two_topics_mapping_to_one_table_are_refused(node: TableNode) -> None:
    base = f"orders_{uuid.uuid4().hex[:6]}"
    node.create_topic(f"{base}-eu", table_configs())
    reason = invalid_config(lambda: node.create_topic(f"{base}.eu", table_configs()))
    assert f"{base}-eu" in reason and "automq.table.topic.table.name" in reason
    node.create_topic(f"{base}.eu", table_configs(table_name=f"{base}_eu2"))  # the way out
