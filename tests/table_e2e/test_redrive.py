"""``tabletopic tables redrive``: dead letters whose cause is fixed (their schema registered late)
are replayed into the table exactly once, with the replayed DLQ offsets committed with the rows; a
kill -9 of the redrive before or after its commit neither loses nor duplicates a record, while the
live pipeline keeps committing. ``tables verify`` proves the result."""

from __future__ import annotations

import io
import json
import struct
import subprocess
from typing import Any

import fastavro
import pytest

from tests.support.schemas import avro_record
from tests.support.table_node import TableNode, assert_exactly_once, table_configs
from tests.support.table_ops import tables_cli
from tests.support.table_producers import avro_bytes, produce_bytes

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]

ITEM = avro_record("Item", {"id": "int", "label": "string"})
# The schema the late records were written with: registered only after they reached the DLQ.
ITEM_V2 = {
    "type": "record",
    "name": "Item",
    "fields": [*ITEM["fields"], {"name": "note", "type": ["null", "string"], "default": None}],  # type: ignore[misc]
}
POISONED = (5, 11, 12, 20, 29)


def cli(node: TableNode, *args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    return tables_cli(node, *args, crash_at=crash_at)


def framed(schema_id: int, schema: dict[str, Any], value: dict[str, Any]) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), value)
    return b"\x00" + struct.pack(">I", schema_id) + body.getvalue()


def verify(node: TableNode, topic: str) -> dict[str, Any]:
    done = cli(node, "verify", topic, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout[done.stdout.index("{") :]))


def test_redrive_replays_fixed_dead_letters_exactly_once_through_kill_9(inprocess_node: TableNode) -> None:
    node, topic, dlq = inprocess_node, "late_schema_items", "late_schema_items_dlq"
    node.create_topic(dlq, {})
    node.create_topic(topic, table_configs(convert_value_type="by_schema_id", errors_dlq_topic=dlq))
    first = avro_bytes(node, topic, ITEM, {"id": 0, "label": "l0"})
    known = struct.unpack(">I", first[1:5])[0]
    late = known + 1  # the id the registry gives the next schema it sees
    values = [
        framed(late, ITEM_V2, {"id": i, "label": f"l{i}", "note": f"late {i}"})
        if i in POISONED
        else avro_bytes(node, topic, ITEM, {"id": i, "label": f"l{i}"})
        for i in range(30)
    ]
    log = produce_bytes(node, topic, values)
    node.wait_committed(topic, log.end_offsets())
    before = verify(node, topic)
    assert before["partitions"][0]["skipped"] == len(POISONED)
    assert before["partitions"][0]["rows"] == 30 - len(POISONED)

    still_broken = cli(node, "redrive", topic, "--quiet")
    assert still_broken.returncode == 1 and "still fail" in still_broken.stderr, still_broken.stderr

    # The cause is fixed: the schema the late records use is registered (and gets their id).
    assert (
        struct.unpack(">I", avro_bytes(node, topic, ITEM_V2, {"id": 99, "label": "x", "note": None})[1:5])[0]
        == late
    )

    crashed = cli(node, "redrive", topic, "--quiet", crash_at="table.redrive_before_commit")
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr
    assert len(node.rows(topic)) == 30 - len(POISONED)

    # The live pipeline keeps committing between (and during) redrives.
    more = [avro_bytes(node, topic, ITEM, {"id": i, "label": f"l{i}"}) for i in range(30, 40)]
    log = produce_bytes(node, topic, more, log=log)
    node.wait_committed(topic, log.end_offsets())

    crashed = cli(node, "redrive", topic, "--quiet", crash_at="table.redrive_after_commit")
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr
    again = cli(node, "redrive", topic, "--quiet")
    assert again.returncode == 0 and "nothing to redrive" in again.stdout, again.stdout + again.stderr

    rows = node.rows(topic)
    assert_exactly_once(rows, log)
    redriven = {r["_kafka_metadata"]["offset"]: r["_kafka_value"] for r in rows}
    assert all(redriven[i]["note"] == f"late {i}" for i in POISONED)
    after = verify(node, topic)
    assert after["ok"] and after["partitions"][0]["skipped"] == 0 and after["partitions"][0]["rows"] == 40
    status = node.table_status(topic)
    assert status is not None and status["rows_committed"] == 40


def test_redrive_names_a_topic_without_a_dead_letter_topic(inprocess_node: TableNode) -> None:
    inprocess_node.create_topic("no_dlq_items", table_configs(convert_value_type="string"))
    done = cli(inprocess_node, "redrive", "no_dlq_items", "--quiet")
    assert done.returncode == 1 and "no dead-letter topic" in done.stderr, done.stderr
