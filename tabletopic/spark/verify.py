"""The table side of ``tables verify`` on Spark, for tables too big to scan in one Python process.

Spark reduces the table's rows to offset *ranges* (consecutive offsets folded with the
gaps-and-islands trick: ``offset - row_number()`` is constant along a run) and duplicated ranges
with their copy count; only those few rows reach the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tabletopic.table.ops.verify import TableCoverage

COVERAGE_SQL = """
WITH pos AS (
  SELECT _kafka_metadata.partition AS p, _kafka_metadata.offset AS o FROM {table} VERSION AS OF {snapshot}
),
counted AS (SELECT p, o, count(*) AS n FROM pos GROUP BY p, o),
runs AS (SELECT p, o, n, o - row_number() OVER (PARTITION BY p ORDER BY o) AS g FROM counted),
dup_runs AS (
  SELECT p, o, n, o - row_number() OVER (PARTITION BY p, n ORDER BY o) AS g FROM counted WHERE n > 1
)
SELECT 'present' AS kind, p, min(o) AS s, max(o) + 1 AS e, 1 AS n, sum(n) AS rows FROM runs GROUP BY p, g
UNION ALL
SELECT 'dup' AS kind, p, min(o) AS s, max(o) + 1 AS e, n, 0 AS rows FROM dup_runs GROUP BY p, n, g
"""


def spark_coverage(
    spark: Any, table_name: str, snapshot_id: int | None, progress: Callable[[int], None]
) -> dict[int, TableCoverage]:
    """Coverage of every partition of ``table_name`` (as Spark names it) at ``snapshot_id``."""
    if snapshot_id is None:
        return {}
    spark.sparkContext.setJobDescription(f"tabletopic verify {table_name}")
    coverage: dict[int, TableCoverage] = {}
    for row in spark.sql(COVERAGE_SQL.format(table=table_name, snapshot=int(snapshot_id))).collect():
        cov = coverage.setdefault(int(row["p"]), TableCoverage())
        if row["kind"] == "present":
            cov.present.append((int(row["s"]), int(row["e"])))
            cov.rows += int(row["rows"])
            progress(int(row["rows"]))
        else:
            cov.duplicates.append((int(row["s"]), int(row["e"]), int(row["n"])))
    for cov in coverage.values():
        cov.present.sort()
        cov.duplicates.sort()
    return coverage
