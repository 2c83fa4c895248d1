"""A node whose object store and Iceberg warehouse both live on S3 (SeaweedFS): the Spark job reads
stream objects and writes data files over s3a, pyiceberg reads them back through the REST catalog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.table_node import SPARK_NODE_SETTINGS, TableNode, assert_exactly_once, table_configs
from tests.support.table_producers import produce

pytestmark = [
    pytest.mark.integration,
    pytest.mark.spark,
    pytest.mark.s3,
    pytest.mark.slow,
    pytest.mark.timeout(500),
]


@pytest.fixture
def s3_node(tmp_path: Path, s3_settings: dict[str, str]) -> Iterator[TableNode]:
    warehouse = f"s3://{s3_settings['s3.bucket']}/{s3_settings['s3.prefix']}warehouse"
    settings = {
        **SPARK_NODE_SETTINGS,
        **s3_settings,
        "s3stream.object.store": "s3",
        "automq.table.topic.catalog.warehouse": warehouse,
        # Stream data goes to S3 quickly, so the job reads it from S3 rather than a local cache.
        "s3stream.upload.interval.ms": "500",
    }
    node = TableNode(tmp_path / "s3-node", settings)
    node.start(timeout=180)
    yield node
    node.kill()


def test_node_on_s3_ingests_a_topic_exactly_once(s3_node: TableNode, s3_settings: dict[str, str]) -> None:
    topic = "s3_events"
    s3_node.create_topic(topic, table_configs(convert_value_type="string"), partitions=2)
    log = produce(s3_node, topic, [f"event {i}".encode() for i in range(400)], partitions=2)
    s3_node.wait_committed(topic, log.end_offsets(), timeout=300)

    table = s3_node.load_table(topic)
    assert table.location().startswith(("s3://", "s3a://"))
    files = [task.file.file_path for task in table.scan().plan_files()]
    assert files and all(path.startswith(("s3://", "s3a://")) for path in files)
    rows = table.scan().to_arrow().to_pylist()
    assert_exactly_once(rows, log)
    assert {r["_kafka_value"] for r in rows} == {f"event {i}" for i in range(400)}
