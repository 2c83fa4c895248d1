"""Several table topics with different converters committing at the same time on one node."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.support.table_node import DeliveryLog, TableNode, assert_exactly_once, table_configs
from tests.support.table_producers import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

METRIC = {
    "type": "record",
    "name": "Metric",
    "fields": [{"name": "host", "type": "string"}, {"name": "value", "type": "double"}],
}


def test_three_table_topics_with_different_converters_commit_concurrently(
    node: TableNode, topic_name: str
) -> None:
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    avro, json_topic, raw = f"{topic_name}_avro", f"{topic_name}_json", f"{topic_name}_raw"
    node.create_topic(
        avro, table_configs(convert_value_type="by_schema_id", transform_value_type="flatten"), 2
    )
    node.create_topic(
        json_topic, table_configs(convert_value_type="by_schema_id", transform_value_type="flatten"), 2
    )
    node.create_topic(raw, table_configs(convert_value_type="raw"), 2)
    json_schema = {
        "type": "object",
        "properties": {"host": {"type": "string"}, "value": {"type": "number"}},
    }
    jobs: dict[str, tuple[list[Any], Any]] = {
        avro: (
            [{"host": f"h{i}", "value": i / 3} for i in range(200)],
            AvroSerializer(node.registry(), json.dumps(METRIC)),
        ),
        json_topic: (
            [{"host": f"h{i}", "value": i / 7} for i in range(200)],
            JSONSerializer(json.dumps(json_schema), node.registry()),
        ),
        raw: ([f"r{i}".encode() for i in range(200)], None),
    }
    logs = {name: DeliveryLog() for name in jobs}
    commits_before = {name: 0 for name in jobs}

    def run(name: str) -> None:
        values, serializer = jobs[name]
        # Three rounds per topic so their commits interleave with the others'.
        for round_ in range(3):
            chunk = values[round_ * len(values) // 3 : (round_ + 1) * len(values) // 3]
            produce(node, name, chunk, serializer, partitions=2, log=logs[name])

    threads = [threading.Thread(target=run, args=(name,)) for name in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for name, log in logs.items():
        assert len(log.acked) == 200
        status = node.wait_committed(name, log.end_offsets(), timeout=180)
        assert status["state"] in ("RUNNING", "IDLE")
        assert status["commits"] > commits_before[name]
        rows = node.rows(name)
        assert_exactly_once(rows, log)
    listed = {t["topic"] for t in __import__("httpx").get(f"{node.admin_url}/v1/tables").json()}
    assert set(jobs) <= listed
