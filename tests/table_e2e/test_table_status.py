"""Table-topic status from the truth on a real node: lag against the live high watermark before the
first commit (admin API, CLI and Prometheus agree), and rows/commits/last commit read from the table
after a restart."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from confluent_kafka import Producer

from tests.support.table_node import TableNode, table_configs
from tests.support.table_ops import admin_tables_cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def produce(node: TableNode, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=str(i), value=f"v{i}")
    assert producer.flush(30) == 0


def lag_metric(node: TableNode, topic: str) -> float:
    text = httpx.get(f"{node.admin_url}/metrics", timeout=10).text
    prefix = f'tabletopic_table_lag_records{{topic="{topic}"}}'
    line = next(x for x in text.splitlines() if x.startswith(prefix))
    return float(line.split()[-1])


@pytest.mark.spark
def test_lag_before_the_first_commit_is_the_records_waiting_now(node: TableNode, topic_name: str) -> None:
    node.create_topic(topic_name, table_configs(convert_value_type="string", commit_interval_ms="600000"))
    node.wait_status(topic_name, lambda s: s["state"] != "STARTING", 60, "first cycle")
    produced_at = time.time()
    produce(node, topic_name, 1000)
    status = node.table_status(topic_name)
    assert status is not None and status["commits"] == 0
    assert status["high_watermarks"] == {"0": 1000} and status["lag_records"] == 1000
    # The age of the oldest waiting record, not the pipeline's age.
    assert 0 <= status["lag_seconds"] <= time.time() - produced_at + 5
    assert lag_metric(node, topic_name) == 1000

    node.trigger_commit(topic_name)
    done = node.wait_committed(topic_name, {0: 1000})
    assert done["lag_records"] == 0 and done["lag_seconds"] == 0
    assert done["rows_committed"] == 1000 and done["commits"] == 1
    assert lag_metric(node, topic_name) == 0


def test_tables_list_after_a_restart_shows_rows_and_commits_from_the_table(inprocess_node: TableNode) -> None:
    node = inprocess_node
    topic = "restarted_orders"
    node.create_topic(topic, table_configs(convert_value_type="string"))
    produce(node, topic, 120)
    node.wait_committed(topic, {0: 120})
    produce(node, topic, 60)
    before = node.wait_committed(topic, {0: 180})
    assert before["rows_committed"] == 180

    node.stop()
    node.start()
    listed = admin_tables_cli(node, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    mine = next(t for t in json.loads(listed.stdout) if t["topic"] == topic)
    assert mine["rows_committed"] == 180
    assert mine["commits"] == before["commits"] >= 2
    assert mine["last_commit_time"] is not None and mine["last_commit_snapshot"] is not None
    assert mine["lag_records"] == 0 and mine["high_watermarks"] == {"0": 180}
    described = admin_tables_cli(node, "describe", topic)
    assert described.returncode == 0 and "180 rows" in described.stdout, described.stdout
