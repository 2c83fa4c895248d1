"""``tabletopic sql --engine duckdb``: DuckDB over pyiceberg scans answers queries on a table topic's
table without Spark, through the node's catalog and, once the node is stopped, straight from its data
directory (no network, no DuckDB extension)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.table_node import TableNode, table_configs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def duck_sql(node: TableNode, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", "sql", *node.cli_options, "--engine", "duckdb", *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        env=dict(os.environ, TABLETOPIC_LOG_LEVEL="WARNING"),
    )


def test_duckdb_engine_queries_a_table_topic_with_the_node_up_and_down(tmp_path: Path) -> None:
    node = TableNode(
        tmp_path / "node",
        {"table.job.runner": "inprocess", "table.coordinator.poll.interval.ms": "200", "log.level": "INFO"},
    )
    node.start()
    try:
        node.create_topic("duck_clicks", table_configs(convert_value_type="string"), partitions=2)
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
        for i in range(50):
            producer.produce("duck_clicks", key=str(i), value=f"page-{i % 5}", partition=i % 2)
        assert producer.flush(30) == 0
        node.wait_committed("duck_clicks", {0: 25, 1: 25})
        query = (
            "SELECT count(*) AS n, count(DISTINCT _kafka_value) AS pages, "
            "max(_kafka_metadata.offset) AS top FROM default.duck_clicks"
        )
        up = duck_sql(node, "--format", "json", query)
        assert up.returncode == 0, up.stderr
        assert json.loads(up.stdout) == {"n": 50, "pages": 5, "top": 24}
        # As a user types it in the shell: the table topics' namespace is the current one.
        bare = duck_sql(
            node, "--format", "csv", stdin="SHOW TABLES;\nSELECT count(*) AS n FROM duck_clicks;\n"
        )
        assert bare.returncode == 0, bare.stderr
        assert bare.stdout.splitlines() == ["namespace,tableName", "default,duck_clicks", "n", "50"]
    finally:
        node.stop()

    # Offline: the built-in catalog is opened from the data directory; statements come from a pipe.
    down = duck_sql(
        node,
        "--format",
        "csv",
        stdin="SELECT _kafka_value AS page, count(*) AS n FROM default.duck_clicks GROUP BY 1 ORDER BY 1;\n"
        "SELECT * FROM default.nothing_here;\n",
    )
    assert down.returncode == 0, down.stderr
    assert down.stdout.splitlines()[:3] == ["page,n", "page-0,10", "page-1,10"]
    assert "nothing_here" in down.stderr
    failing = duck_sql(node, "SELECT * FROM default.nothing_here")
    assert failing.returncode == 1 and "no table default.nothing_here in the catalog" in failing.stderr, (
        failing.stderr
    )
