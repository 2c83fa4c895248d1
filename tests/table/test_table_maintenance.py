"""Table maintenance on a schedule per table: each task has its own interval per table, counted from
when the table is first seen; a failing task is reported and the others still run; the pipeline shows
what ran in its status. The Spark procedures themselves run against a real Iceberg table."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tabletopic.table import coordinator as coordinator_module
from tabletopic.table.coordinator import CoordinatorContext, TopicPipeline
from tabletopic.table.ops.maintenance import MaintenanceSchedule, TableMaintenance
from tests.support.table_coordinator import Node


class FakeSpark:
    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def sql(self, text: str) -> Any:
        self.calls.append(text)
        if self.fail and self.fail in text:
            raise RuntimeError("procedure failed")
        return SimpleNamespace(
            first=lambda: SimpleNamespace(asDict=lambda: {"ok": 1}), collect=lambda: [1, 2]
        )


def stub_table(name: str) -> Any:
    return SimpleNamespace(name=lambda: ("tabletopic", "db", name))


CONFIG = SimpleNamespace(expire_snapshot_enabled=False, writes_deletes=True)
APPEND_CONFIG = SimpleNamespace(expire_snapshot_enabled=False, writes_deletes=False)


def test_each_task_runs_on_its_own_interval_per_table() -> None:
    now = [0.0]
    spark = FakeSpark()
    schedule = MaintenanceSchedule(compaction=10, delete_merge=20, orphan_cleanup=100, orphan_min_age=3600)
    maintain = TableMaintenance(schedule, lambda: spark, "cat", clock=lambda: now[0])
    assert set(maintain(stub_table("a"), CONFIG)) == {"expire_snapshots"}  # first sight: nothing due
    now[0] = 11
    assert set(maintain(stub_table("a"), CONFIG)) == {"expire_snapshots", "compaction"}
    assert set(maintain(stub_table("b"), APPEND_CONFIG)) == {"expire_snapshots"}  # b starts its own clock
    now[0] = 21
    assert set(maintain(stub_table("a"), CONFIG)) == {"expire_snapshots", "compaction", "delete_merge"}
    assert set(maintain(stub_table("b"), APPEND_CONFIG)) == {"expire_snapshots", "compaction"}
    now[0] = 101
    report = maintain(stub_table("a"), CONFIG)
    assert report["orphan_cleanup"] == {"removed_files": 2}
    orphan_call = next(c for c in spark.calls if "remove_orphan_files" in c)
    assert "table => 'db.a'" in orphan_call and "older_than => TIMESTAMP" in orphan_call
    assert not any("rewrite_position_delete_files(table => 'db.b')" in c for c in spark.calls)


def test_a_failing_task_is_reported_and_the_others_still_run() -> None:
    now = [0.0]
    spark = FakeSpark(fail="rewrite_data_files")
    maintain = TableMaintenance(
        MaintenanceSchedule(1, 1, 1, 3600), lambda: spark, "cat", clock=lambda: now[0]
    )
    maintain(stub_table("a"), CONFIG)
    now[0] = 5
    report = maintain(stub_table("a"), CONFIG)
    assert "procedure failed" in report["compaction"]["error"]
    assert report["delete_merge"] == {"ok": 1} and report["orphan_cleanup"] == {"removed_files": 2}


async def test_the_pipeline_status_shows_the_last_maintenance_run(
    node: Node,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(coordinator_module, "MAINTENANCE_INTERVAL_S", 0.0)
    maintain = TableMaintenance(MaintenanceSchedule(), None, "cat")
    ctx = CoordinatorContext(**{**node.ctx.__dict__, "maintenance": maintain})
    view = await node.add_topic("kept", 1, **{"automq.table.topic.convert.value.type": "string"})
    await node.produce(view, 0, [b"a"])
    pipeline = TopicPipeline(ctx, "kept")
    assert await pipeline.run_cycle()
    shown = pipeline.status.as_dict()["maintenance"]
    assert shown["expire_snapshots"]["expired"] == 0 and shown["expire_snapshots"]["at"] > 0


@pytest.mark.spark
@pytest.mark.slow
def test_spark_procedures_compact_merge_deletes_and_remove_old_orphans(
    spark: Any, spark_catalog_name: str, tmp_path: Path
) -> None:
    cat = spark_catalog_name
    spark.conf.set(f"spark.sql.catalog.{cat}", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"spark.sql.catalog.{cat}.type", "hadoop")
    spark.conf.set(f"spark.sql.catalog.{cat}.warehouse", (tmp_path / "wh").as_uri())
    spark.sql(
        f"CREATE TABLE {cat}.db.events (id bigint, v string) USING iceberg TBLPROPERTIES "
        "('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    for batch in range(6):
        spark.sql(f"INSERT INTO {cat}.db.events VALUES ({batch * 2}, 'a'), ({batch * 2 + 1}, 'b')")
    for victim in (1, 3, 5):
        spark.sql(f"DELETE FROM {cat}.db.events WHERE id = {victim}")
    orphan = tmp_path / "wh" / "db" / "events" / "data" / "left-behind.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    old = time.time() - 10 * 86400
    os.utime(orphan, (old, old))

    now = [0.0]
    maintain = TableMaintenance(MaintenanceSchedule(1, 1, 1, 86400), lambda: spark, cat, clock=lambda: now[0])
    table = SimpleNamespace(name=lambda: (cat, "db", "events"))
    maintain(table, CONFIG)  # type: ignore[arg-type]
    now[0] = 5
    report = maintain(table, CONFIG)  # type: ignore[arg-type]
    assert "error" not in report["compaction"], report
    assert report["compaction"]["rewritten_data_files_count"] >= 5, report
    assert "error" not in report["delete_merge"], report
    assert report["orphan_cleanup"]["removed_files"] >= 1, report
    assert not orphan.exists()
    rows = sorted(r["id"] for r in spark.sql(f"SELECT id FROM {cat}.db.events").collect())
    assert rows == [0, 2, 4, 6, 7, 8, 9, 10, 11]
