"""Query-side figures of ``bench/table_bench.py`` (issue 30's targets), each timed end to end as a
user runs the command: a new ``python -m tabletopic`` process per call.

- ``sql``: ``tabletopic sql`` (Spark engine) over a small table, answered by the node's warm Spark
  session through ``/v1/sql``; target 2 s.
- ``cli``: ``tabletopic --help`` and ``tabletopic topics list`` against the node; target 0.5 s.
- ``duckdb``: ``tabletopic sql --engine duckdb`` over the same table; target 1.5 s.
- ``fresh``: ``tabletopic sql --fresh`` over a table with ``--fresh-records`` records produced after
  its last commit (commit interval 10 minutes, so none of them is committed); target 2 s for 100 k.

Each call is run ``repeats`` times; the median and the slowest are reported.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from tests.support.table_node import TableNode, table_configs


def _run(node: TableNode, *args: str, options: bool = True) -> tuple[float, subprocess.CompletedProcess[str]]:
    command = [
        sys.executable,
        "-m",
        "tabletopic",
        *args[:1],
        *(node.cli_options if options else []),
        *args[1:],
    ]
    began = time.monotonic()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TABLETOPIC_LOG_LEVEL="WARNING"),
    )
    elapsed = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed, done


def _times(node: TableNode, repeats: int, *args: str, options: bool = True) -> tuple[list[float], str]:
    times, out = [], ""
    for _ in range(repeats):
        elapsed, done = _run(node, *args, options=options)
        times.append(elapsed)
        out = done.stdout
    return times, out


def summary(times: list[float]) -> str:
    return f"median {statistics.median(times):.2f}s, max {max(times):.2f}s over {len(times)}"


def small_table(node: TableNode, producer: Any, topic: str = "bench_small_query", records: int = 1000) -> str:
    """A committed table of ``records`` string rows; its query (count and a group by)."""
    node.create_topic(topic, table_configs(convert_value_type="string"), partitions=1)
    for i in range(records):
        producer.produce(topic, key=str(i).encode(), value=f"page-{i % 10}".encode())
    producer.flush(30)
    node.wait_committed(topic, {0: records}, timeout=300)
    return f"SELECT _kafka_value AS page, count(*) AS n FROM default.{topic} GROUP BY 1 ORDER BY 1"


def sql_times(node: TableNode, query: str, repeats: int) -> list[float]:
    times, out = _times(node, repeats, "sql", "--format", "json", query)
    assert len(out.splitlines()) == 10, out
    return times


def duckdb_times(node: TableNode, query: str, repeats: int) -> list[float]:
    times, out = _times(node, repeats, "sql", "--engine", "duckdb", "--format", "json", query)
    assert len(out.splitlines()) == 10, out
    return times


def cli_times(node: TableNode, repeats: int) -> dict[str, list[float]]:
    bootstrap = ["--bootstrap-server", node.bootstrap]
    return {
        "tabletopic --help": _times(node, repeats, "--help", options=False)[0],
        "tabletopic topics list": _times(node, repeats, "topics", "list", *bootstrap, options=False)[0],
    }


def fresh_times(node: TableNode, producer: Any, records: int, repeats: int) -> tuple[list[float], int]:
    """``sql --fresh`` over a table whose last commit holds 10 records and whose log holds
    ``records`` more; checks every record is counted once."""
    topic = "bench_fresh"
    node.create_topic(
        topic, table_configs(convert_value_type="string", commit_interval_ms="600000"), partitions=2
    )
    for i in range(10):
        producer.produce(topic, key=str(i).encode(), value=b"committed", partition=i % 2)
    producer.flush(30)
    node.trigger_commit(topic)
    node.wait_committed(topic, {0: 5, 1: 5}, timeout=300)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=f"tail-{i}".encode(), partition=i % 2)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    query = f"SELECT count(*) AS n, count(DISTINCT _kafka_metadata) AS d FROM default.{topic}"
    times, out = _times(node, repeats, "sql", "--fresh", "--format", "json", query)
    counted = json.loads(out.splitlines()[0])
    assert counted == {"n": records + 10, "d": records + 10}, counted
    return times, records
