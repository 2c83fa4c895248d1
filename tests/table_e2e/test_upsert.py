"""Upsert and CDC table topics end to end (``upsert.enable`` + ``id.columns``, ``cdc.field``,
Debezium deletes): the table holds the latest row per key, deletes remove rows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.schemas import DEBEZIUM_ENVELOPE, avro_record
from tests.support.table_node import DeliveryLog, TableNode, table_configs
from tests.support.table_producers import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

ACCOUNT = avro_record(
    "Account", {"id": "int", "owner": "string", "balance": "long", "op": "string"}, defaults={"op": "U"}
)


def serializer(node: TableNode, schema: dict[str, Any]) -> Any:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(node.registry(), json.dumps(schema))


def by_key(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    keyed: dict[int, dict[str, Any]] = {}
    for row in rows:
        assert row["id"] not in keyed, f"two rows for id {row['id']}"
        keyed[row["id"]] = row
    return keyed


def create_accounts_topic(node: TableNode, topic: str) -> Any:
    """An upsert table topic of ``ACCOUNT`` values keyed by ``id`` (2 partitions); returns the
    value serializer."""
    upsert = table_configs(
        convert_value_type="by_schema_id",
        transform_value_type="flatten",
        upsert_enable="true",
        id_columns="[id]",
    )
    node.create_topic(topic, upsert, partitions=2)
    return serializer(node, ACCOUNT)


def test_upsert_keeps_the_latest_row_per_key(node: TableNode, topic_name: str) -> None:
    ser = create_accounts_topic(node, topic_name)
    log = DeliveryLog()
    # Round 1 inserts; round 2 updates half of them twice in one batch (the later wins); round 3 in a
    # later commit updates some again.
    rounds = [
        [{"id": i, "owner": f"o{i}", "balance": 100, "op": "I"} for i in range(20)],
        [{"id": i, "owner": f"o{i}", "balance": b, "op": "U"} for i in range(0, 20, 2) for b in (200, 300)],
        [{"id": i, "owner": f"o{i}-new", "balance": 400, "op": "U"} for i in range(0, 20, 4)],
    ]
    for values in rounds:
        produce(node, topic_name, values, ser, key=lambda _i, v: str(v["id"]), log=log)
        node.wait_committed(topic_name, log.end_offsets(), timeout=180)
    rows = by_key(node.rows(topic_name))
    assert set(rows) == set(range(20))
    for i, row in rows.items():
        expected = 400 if i % 4 == 0 else 300 if i % 2 == 0 else 100
        assert row["balance"] == expected, (i, row)
        assert row["owner"] == (f"o{i}-new" if i % 4 == 0 else f"o{i}")


def test_cdc_field_applies_inserts_updates_and_deletes(node: TableNode, topic_name: str) -> None:
    node.create_topic(
        topic_name,
        table_configs(
            convert_value_type="by_schema_id",
            transform_value_type="flatten",
            cdc_field="op",
            id_columns="[id]",
        ),
    )
    log = DeliveryLog()
    ser = serializer(node, ACCOUNT)
    inserts = [{"id": i, "owner": f"o{i}", "balance": i, "op": "I"} for i in range(10)]
    changes = [
        *({"id": i, "owner": f"o{i}", "balance": 1000 + i, "op": "U"} for i in range(0, 10, 3)),
        *({"id": i, "owner": f"o{i}", "balance": 0, "op": "D"} for i in (1, 4, 7)),
        {"id": 4, "owner": "o4-again", "balance": 44, "op": "I"},  # re-inserted after its delete
    ]
    for values in (inserts, changes):
        produce(node, topic_name, values, ser, key=lambda _i, v: str(v["id"]), log=log)
        node.wait_committed(topic_name, log.end_offsets(), timeout=180)
    rows = by_key(node.rows(topic_name))
    assert set(rows) == set(range(10)) - {1, 7}
    assert rows[4]["owner"] == "o4-again" and rows[4]["balance"] == 44
    for i in (0, 3, 6, 9):
        assert rows[i]["balance"] == 1000 + i


def test_debezium_deletes_remove_rows_from_an_upsert_table(node: TableNode, topic_name: str) -> None:
    node.create_topic(
        topic_name,
        table_configs(
            convert_value_type="by_schema_id",
            transform_value_type="flatten_debezium",
            upsert_enable="true",
            id_columns="[id]",
        ),
    )
    source = {"db": "inventory", "table": "customers"}
    creates = [
        {"before": None, "after": {"id": i, "email": f"{i}@a"}, "op": "c", "ts_ms": i, "source": source}
        for i in range(10)
    ]
    changes = [
        {
            "before": {"id": 2, "email": "2@a"},
            "after": {"id": 2, "email": "2@b"},
            "op": "u",
            "source": source,
        },
        {"before": {"id": 5, "email": "5@a"}, "after": None, "op": "d", "source": source},
        {"before": {"id": 8, "email": "8@a"}, "after": None, "op": "d", "source": source},
    ]
    log = DeliveryLog()
    ser = serializer(node, DEBEZIUM_ENVELOPE)
    for values in (creates, changes):
        values = [{"ts_ms": None, **v} for v in values]
        produce(
            node, topic_name, values, ser, key=lambda _i, v: str((v["after"] or v["before"])["id"]), log=log
        )
        node.wait_committed(topic_name, log.end_offsets(), timeout=180)
    rows = by_key(node.rows(topic_name))
    assert set(rows) == set(range(10)) - {5, 8}
    assert rows[2]["email"] == "2@b"
    assert rows[2]["_cdc"]["op"] == "U"


def test_updates_and_tombstones_in_one_go_keep_the_upsert_table_running(
    node: TableNode, topic_name: str
) -> None:
    # Issue 30's scenario end to end on a node: 1,000 rows committed, then 100 updates and 2
    # tombstones in one cycle. (With these Avro values the node did not fail before the fix either;
    # the repros that do are in tests/table/test_upsert_model.py and test_upsert_spark.py.)
    ser = create_accounts_topic(node, topic_name)
    log = DeliveryLog()
    rows = [{"id": i, "owner": f"o{i}", "balance": i, "op": "I"} for i in range(1000)]
    produce(node, topic_name, rows, ser, key=lambda _i, v: str(v["id"]), log=log)
    node.wait_committed(topic_name, log.end_offsets(), timeout=180)
    changes: list[Any] = [{"id": i, "owner": f"o{i}", "balance": -i, "op": "U"} for i in range(100, 200)]
    keys = [str(i) for i in range(100, 200)] + ["7", "8"]
    # One linger for all of them: both partitions' records reach the node together, so one cycle
    # takes the updates and the tombstones.
    from confluent_kafka import SerializingProducer
    from confluent_kafka.serialization import StringSerializer

    producer = SerializingProducer(
        {
            "bootstrap.servers": node.bootstrap,
            "linger.ms": 2000,
            "key.serializer": StringSerializer(),
            "value.serializer": ser,
        }
    )
    for i, value in enumerate([*changes, None, None]):
        producer.produce(topic_name, key=keys[i], value=value, on_delivery=log.callback(value))
    assert producer.flush(60) == 0 and not log.errors
    ends = log.end_offsets()

    def settled(status: dict[str, Any]) -> bool:
        committed = status["committed_offsets"]
        return status["state"] == "FAILED" or all(committed.get(str(p), 0) >= e for p, e in ends.items())

    status = node.wait_status(topic_name, settled, 180, f"committed offsets {ends} or FAILED")
    assert status["state"] != "FAILED", status
    found = by_key(node.rows(topic_name))
    assert set(found) == set(range(1000)) - {7, 8}
    assert all(found[i]["balance"] == (-i if 100 <= i < 200 else i) for i in found)
