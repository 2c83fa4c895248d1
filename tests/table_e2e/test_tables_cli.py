"""``tabletopic tables list|describe|commit`` against a running node, as a user runs them."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from tests.support.table_node import TableNode, table_configs
from tests.support.table_ops import admin_tables_cli

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_tables_cli_shows_commits_offsets_and_lag(node: TableNode, topic_name: str) -> None:
    node.create_topic(topic_name, table_configs(convert_value_type="string"), partitions=2)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(20):
        producer.produce(topic_name, key=str(i), value=f"v{i}", partition=i % 2)
    assert producer.flush(30) == 0
    node.wait_committed(topic_name, {0: 10, 1: 10})

    listed = admin_tables_cli(node, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    mine = next(t for t in json.loads(listed.stdout) if t["topic"] == topic_name)
    assert mine["table"] == f"default.{topic_name.replace('-', '_')}" or mine["table"].startswith("default.")
    assert mine["rows_committed"] == 20 and mine["lag_records"] == 0

    described = admin_tables_cli(node, "describe", topic_name)
    assert described.returncode == 0, described.stderr
    # After its commit the pipeline's next cycle finds nothing new and reports IDLE: either is healthy.
    assert "committed offset" in described.stdout
    assert "RUNNING" in described.stdout or "IDLE" in described.stdout

    assert admin_tables_cli(node, "commit", topic_name).returncode == 0


def test_tables_cli_names_an_unknown_topic(node: TableNode) -> None:
    result = admin_tables_cli(node, "describe", "no-such-topic")
    assert result.returncode == 1
    assert "not a table topic" in result.stderr
