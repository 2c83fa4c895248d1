"""``tabletopic demo`` as a newcomer runs it: a subprocess against a running node."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.table_node import TableNode

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]


def test_demo_produces_waits_for_the_commit_and_prints_a_spark_sql_result(
    node: TableNode, topic_name: str, page: Any, screenshots: Path
) -> None:
    topic = f"{topic_name}.orders"
    done = subprocess.run(
        [sys.executable, "-m", "tabletopic", "demo", "-n", "250", "--topic", topic, *node.cli_options],
        capture_output=True,
        text=True,
        timeout=360,
        env=dict(os.environ, COLUMNS="200", TABLETOPIC_LOG_LEVEL="WARNING"),
    )
    output = done.stdout
    assert done.returncode == 0, f"{output}\n{done.stderr}"
    assert f"created table topic {topic}" in output
    assert "250 orders acknowledged" in output
    assert f"committed to Iceberg table {topic_name}.orders" in output
    assert "revenue" in output and "customer" in output  # the query's header
    assert any(name in output for name in ("ada", "grace", "linus"))
    assert "tabletopic sql --data-dir" in output and f"FROM {topic_name}.orders" in output

    # The console link it prints shows the demo's table topic, its freshness plot and its rows.
    link = re.search(r"watch it in the console: (\S+)", output)
    assert link is not None and link.group(1).startswith(node.admin_url)
    page.goto(link.group(1))
    page.wait_for_function(
        "() => { const c = document.querySelector('#freshness-chart');"
        " return c && c.querySelector('canvas') && Number(c.dataset.points) > 0; }"
    )
    assert any(name in page.locator("#rows-preview").inner_text() for name in ("ada", "grace", "linus"))
    page.screenshot(path=str(screenshots / "demo-table-topic.png"), full_page=True)

    table = node.catalog().load_table(f"{topic_name}.orders")
    assert len(table.scan().to_arrow()) == 250
    assert [type(f.transform).__name__ for f in table.spec().fields] == ["DayTransform"]
