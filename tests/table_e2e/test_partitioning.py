"""``automq.table.topic.partition.by``: the spec at creation, and a new spec after the topic's config
changes through IncrementalAlterConfigs (new data is written with the new spec)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tests.support.schemas import TIMESTAMP_MILLIS, avro_record
from tests.support.table_node import DeliveryLog, TableNode, assert_exactly_once, table_configs
from tests.support.table_producers import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

EVENT = avro_record("Event", {"id": "long", "kind": "string", "ts": TIMESTAMP_MILLIS})
START = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)


def events(first: int, count: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "kind": f"k{i % 3}", "ts": START + dt.timedelta(hours=7 * i)}
        for i in range(first, first + count)
    ]


def test_partition_spec_at_creation_then_altered_spec_for_new_data(node: TableNode, topic_name: str) -> None:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    node.create_topic(
        topic_name,
        table_configs(
            convert_value_type="by_schema_id",
            transform_value_type="flatten",
            partition_by="[bucket(id, 4), day(ts)]",
        ),
    )
    serializer = AvroSerializer(node.registry(), json.dumps(EVENT))
    log = DeliveryLog()
    produce(node, topic_name, events(0, 40), serializer, log=log)
    node.wait_committed(topic_name, log.end_offsets())

    table = node.load_table(topic_name)
    first_spec = table.spec()
    assert [f.transform.__class__.__name__ for f in first_spec.fields] == ["BucketTransform", "DayTransform"]
    assert first_spec.fields[0].transform.num_buckets == 4
    first_files = {task.file.file_path for task in table.scan().plan_files()}
    assert len(first_files) > 1  # rows spread over buckets and days
    assert {task.file.spec_id for task in table.scan().plan_files()} == {first_spec.spec_id}

    node.alter_topic(topic_name, {"automq.table.topic.partition.by": "[kind, hour(ts)]"})
    produce(node, topic_name, events(40, 30), serializer, log=log)
    node.wait_committed(topic_name, log.end_offsets())

    table = node.load_table(topic_name)
    assert len(table.specs()) == 2
    new_spec = table.spec()
    assert new_spec.spec_id != first_spec.spec_id
    names = [
        f.transform.__class__.__name__
        for f in new_spec.fields
        if "Void" not in f.transform.__class__.__name__
    ]
    assert names == ["IdentityTransform", "HourTransform"]
    by_spec: dict[int, int] = {}
    for task in table.scan().plan_files():
        by_spec[task.file.spec_id] = by_spec.get(task.file.spec_id, 0) + task.file.record_count
    assert by_spec == {first_spec.spec_id: 40, new_spec.spec_id: 30}
    assert_exactly_once(table.scan().to_arrow().to_pylist(), log)
