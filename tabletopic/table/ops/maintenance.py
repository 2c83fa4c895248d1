"""Table maintenance on a schedule per table: snapshot expiry, compaction of small data files,
merging of position-delete files (upsert/CDC tables), and removal of orphan files.

It runs on the table's own pipeline task right after one of its commits, so it never overlaps that
table's ingest; a maintenance commit that lands while another node plans an ingest turns that ingest
commit into a re-plan (ingest commits are conditional), never into a duplicate. Each task has its own
interval per table, counted from the first time the table is seen, so a restart does not compact
everything at once. What ran last, with Spark's result or the error, is kept for the status API.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.table import Table

from tabletopic.table.maintenance import compact, expire_snapshots
from tabletopic.table.table_config import TableTopicConfig

log = logging.getLogger(__name__)

SparkFactory = Callable[[], Any]


@dataclass(frozen=True)
class MaintenanceSchedule:
    """Intervals in seconds (0 disables a task)."""

    compaction: float = 3600.0
    delete_merge: float = 3600.0
    orphan_cleanup: float = 86400.0
    # Files younger than this are never orphans: an ingest job or MERGE may still be writing them.
    orphan_min_age: float = 3 * 86400.0


@dataclass(eq=False)
class TableMaintenance:
    """The maintenance callable of the coordinator: ``(table, config) -> report``."""

    schedule: MaintenanceSchedule
    spark: SparkFactory | None
    spark_catalog: str
    clock: Callable[[], float] = time.monotonic
    # When each (table, task) last ran: a task is due ``interval`` after its last run.
    _last: dict[tuple[str, str], float] = field(default_factory=dict, init=False)

    def _due(self, table: str, task: str, interval: float) -> bool:
        if not interval:
            return False
        now = self.clock()
        last = self._last.setdefault((table, task), now)
        if now - last < interval:
            return False
        self._last[(table, task)] = now
        return True

    def _spark_name(self, table: Table) -> str:
        return ".".join(table.name()[1:] if len(table.name()) > 2 else table.name())

    def __call__(self, table: Table, config: TableTopicConfig) -> dict[str, Any]:
        name = ".".join(table.name())
        report: dict[str, Any] = {}
        report["expire_snapshots"] = {"expired": expire_snapshots(table, config)}
        if self.spark is None:
            return report
        schedule = self.schedule
        tasks: list[tuple[str, float, Callable[[], dict[str, Any]]]] = [
            (
                "compaction",
                schedule.compaction,
                lambda: compact(self._spark_or_fail, self.spark_catalog, table),
            ),
            ("orphan_cleanup", schedule.orphan_cleanup, lambda: self._remove_orphans(table)),
        ]
        if config.writes_deletes:
            tasks.insert(1, ("delete_merge", schedule.delete_merge, lambda: self._merge_deletes(table)))
        for task, interval, run in tasks:
            if not self._due(name, task, interval):
                continue
            try:
                report[task] = run()
            except Exception as exc:  # one task failing never stops the others or the ingest
                log.warning("table %s: %s failed: %s", name, task, exc)
                report[task] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        return report

    def _spark_or_fail(self) -> Any:
        assert self.spark is not None
        return self.spark()

    def _merge_deletes(self, table: Table) -> dict[str, Any]:
        """Fold the many small position-delete files of an upsert/CDC table into fewer."""
        name = self._spark_name(table)
        call = f"CALL {self.spark_catalog}.system.rewrite_position_delete_files(table => '{name}')"
        row = self._spark_or_fail().sql(call).first()
        result = row.asDict() if row is not None else {}
        log.info("merged delete files of %s: %s", self._spark_name(table), result)
        return result

    def _remove_orphans(self, table: Table) -> dict[str, Any]:
        """Delete files under the table's location that no snapshot references (a job killed after
        writing, a conflict that re-planned), older than ``orphan_min_age``."""
        cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=self.schedule.orphan_min_age)
        stamp = cutoff.strftime("%Y-%m-%d %H:%M:%S")
        rows = (
            self._spark_or_fail()
            .sql(
                f"CALL {self.spark_catalog}.system.remove_orphan_files(table => '{self._spark_name(table)}', "
                f"older_than => TIMESTAMP '{stamp}')"
            )
            .collect()
        )
        log.info("removed %d orphan files of %s", len(rows), self._spark_name(table))
        return {"removed_files": len(rows)}
