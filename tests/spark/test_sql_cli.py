"""``tabletopic sql`` end to end, as a user runs it: a subprocess on a data directory."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]


def tabletopic(
    *args: str, stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TABLETOPIC_LOG_LEVEL="WARNING")
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def unused_listener() -> str:
    from tests.support.ports import free_port

    return f"catalog.listener=http://127.0.0.1:{free_port()}"


def sql_on(data_dir: Path, output_format: str) -> list[str]:
    """``sql`` on ``data_dir``'s built-in catalog, served from the command's own process on a free
    port, printing ``output_format``."""
    return ["sql", "-d", str(data_dir), "-o", unused_listener(), "--format", output_format]


def test_sql_runs_statements_prints_json_and_a_piped_shell_reads_the_same_table(tmp_path: Path) -> None:
    # No node runs: the command serves the built-in catalog from its own process on the data dir.
    first = tabletopic(
        *sql_on(tmp_path, "json"),
        "CREATE NAMESPACE IF NOT EXISTS shop; "
        "CREATE TABLE shop.orders (id bigint, item string) USING iceberg; "
        "INSERT INTO shop.orders VALUES (1, 'apple'), (2, 'pear; ripe'); "
        "SELECT * FROM shop.orders ORDER BY id; "
        "SELECT * FROM nowhere.nothing",
    )
    # Every statement runs; the failing one is reported and makes the exit status 1.
    assert first.returncode == 1, first.stderr[-3000:]
    assert "error" in first.stderr
    rows = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert rows == [{"id": 1, "item": "apple"}, {"id": 2, "item": "pear; ripe"}]
    # Neither Spark's start-up chatter nor library deprecation warnings reach the user.
    for noise in ("Setting default log level", "NativeCodeLoader", "DeprecationWarning", "sc.setLogLevel"):
        assert noise not in first.stderr, first.stderr[-3000:]

    # The piped shell splits statements the same way whatever the engine; DuckDB reads the table
    # Spark wrote without starting a second JVM.
    second = tabletopic(
        *sql_on(tmp_path, "csv"),
        "--engine",
        "duckdb",
        stdin="SELECT count(*) AS n,\n  max(id) AS top\nFROM shop.orders;\nSELECT * FROM shop.nope;\n",
    )
    assert second.returncode == 0, second.stderr[-3000:]
    parsed = list(csv.reader(io.StringIO(second.stdout)))
    assert ["n", "top"] in parsed and ["2", "2"] in parsed
    assert "nope" in second.stderr, second.stderr[-3000:]


def test_print_config_gives_the_spark_flags_for_the_catalog(tmp_path: Path) -> None:
    result = tabletopic("sql", "-d", str(tmp_path), "--print-config", timeout=60)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "--conf spark.sql.catalog.tabletopic=org.apache.iceberg.spark.SparkCatalog" in out
    assert "--conf spark.sql.catalog.tabletopic.uri=http://127.0.0.1:8181" in out
    assert "--conf spark.sql.defaultCatalog=tabletopic" in out
    assert "iceberg-spark-runtime-3.5_2.12-1.10.2.jar" in out
