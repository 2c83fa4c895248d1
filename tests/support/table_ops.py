"""Helpers of the table operations tests (verify, redrive, rebuild): the ``tables`` CLI run as a
user runs it, and a table corrupted behind the pipeline's back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tests.support.table_node import TableNode


def admin_tables_cli(node: TableNode, *args: str) -> subprocess.CompletedProcess[str]:
    """``tabletopic tables --admin-url <node's admin API> ARGS``: the CLI as a remote operator runs
    it, knowing only the HTTP address."""
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", "tables", "--admin-url", node.admin_url, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def tables_cli(
    node: TableNode, *args: str, crash_at: str | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """``tabletopic tables <node options> ARGS``; ``crash_at`` sets the crash point of that process."""
    env = dict(os.environ, TABLETOPIC_LOG_LEVEL="WARNING")
    env.pop("TABLETOPIC_CRASH_AT", None)
    if crash_at:
        env["TABLETOPIC_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", "tables", *node.cli_options, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def json_report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(done.stdout[done.stdout.index("{") :]))


def corrupt(node: TableNode, topic: str, duplicate: tuple[int, int], remove: tuple[int, int]) -> None:
    """Rewrite the table with one row twice and one row gone (an overwrite snapshot: the committed
    offsets stay those of its parent, the last ingest commit)."""
    table = node.load_table(topic)
    rows = table.scan().to_arrow()
    meta = rows.column("_kafka_metadata")
    partition, offset = pc.struct_field(meta, "partition"), pc.struct_field(meta, "offset")

    def at(position: tuple[int, int]) -> pa.ChunkedArray:
        return pc.and_(pc.equal(partition, position[0]), pc.equal(offset, position[1]))

    kept = rows.filter(pc.invert(at(remove)))
    table.overwrite(pa.concat_tables([kept, rows.filter(at(duplicate))]))
