"""Table maintenance between ingest cycles: snapshot expiry and small-file compaction.

Runs on the coordinator's own task, never concurrently with that topic's ingest, and a compaction
that lands between planning and committing only turns the ingest commit into a re-plan (the commit
is conditional), never into a duplicate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from pyiceberg.table import Table
from pyiceberg.table.update.snapshot import ExpireSnapshots

from tabletopic.table.commit import OFFSETS_PROPERTY, new_transaction
from tabletopic.table.table_config import TableTopicConfig

log = logging.getLogger(__name__)


def protected_snapshots(table: Table) -> set[int]:
    """The current snapshot and its ancestors down to the newest one carrying committed offsets:
    expiring any of them would break the walk that recovers the offsets."""
    keep: set[int] = set()
    snapshot = table.metadata.current_snapshot()
    while snapshot is not None:
        keep.add(snapshot.snapshot_id)
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        if OFFSETS_PROPERTY in props or snapshot.parent_snapshot_id is None:
            break
        snapshot = table.metadata.snapshot_by_id(snapshot.parent_snapshot_id)
    return keep


def expire_snapshots(table: Table, config: TableTopicConfig, now: float | None = None) -> int:
    """Expire snapshots older than ``expire.snapshot.older.than.hours`` beyond the newest
    ``retain.last``; returns how many were expired."""
    if not config.expire_snapshot_enabled:
        return 0
    now = time.time() if now is None else now
    cutoff_ms = int((now - config.expire_snapshot_older_than_hours * 3600) * 1000)
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True)
    keep = protected_snapshots(table)
    keep.update(s.snapshot_id for s in snapshots[: max(config.expire_snapshot_retain_last, 1)])
    expired = [s.snapshot_id for s in snapshots if s.snapshot_id not in keep and s.timestamp_ms < cutoff_ms]
    if expired:
        # pyiceberg's own expiry reads the staged metadata twice per snapshot it expires, each read
        # a copy of the whole history: a minute of one-second commits expired from an hour's
        # history was 120 copies of 3,600 snapshots. The pipeline's transaction copies nothing
        # until something is staged.
        ExpireSnapshots(new_transaction(table, autocommit=True)).by_ids(expired).commit()
        log.info("expired %d snapshots of %s", len(expired), table.name())
    return len(expired)


def compact(spark_factory: Callable[[], Any], spark_catalog: str, table: Table) -> dict[str, Any]:
    """Rewrite small data files with Spark (binpack); returns Spark's result row as a dict."""
    spark = spark_factory()
    name = ".".join(table.name()[1:] if len(table.name()) > 2 else table.name())
    row = spark.sql(
        f"CALL {spark_catalog}.system.rewrite_data_files(table => '{name}', "
        "options => map('min-input-files', '5', 'delete-file-threshold', '1'))"
    ).first()
    result = row.asDict() if row is not None else {}
    log.info("compacted %s: %s", name, result)
    return result
