"""Upsert and CDC: apply a batch of decoded rows to the table with one Spark ``MERGE INTO``.

The batch's rows are staged as plain Parquet by the ingest tasks; here the latest row per key wins
(by record timestamp, then partition and offset), rows whose operation is a delete remove their key,
the rest update or insert. The committed offsets ride in the MERGE's own snapshot (Iceberg's
commit-properties thread-local), so data and offsets land atomically. Re-applying the same batch
leaves the same table, which makes the rare re-apply after a lost commit response harmless.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN

log = logging.getLogger(__name__)

DELETE_OPS = ("D", "d")


@contextlib.contextmanager
def commit_properties(spark: Any, properties: Mapping[str, str]) -> Iterator[None]:
    """Attach ``properties`` to every Iceberg snapshot committed by this thread meanwhile.

    Iceberg keeps them in a thread-local (``CommitMetadata``) only reachable through a Java callable;
    PySpark pins each Python thread to one JVM thread, so setting the thread-local here and running
    the SQL from the same Python thread is equivalent and needs no py4j callback server.
    """
    jvm = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    cls = jvm.java.lang.Class.forName("org.apache.iceberg.spark.CommitMetadata", True, loader)
    field = cls.getDeclaredField("COMMIT_PROPERTIES")
    field.setAccessible(True)
    holder = field.get(None)
    values = jvm.java.util.HashMap()
    for key, value in properties.items():
        values.put(key, value)
    holder.set(values)
    try:
        yield
    finally:
        holder.remove()


def _quote(path: str) -> str:
    return ".".join(f"`{part}`" for part in path.split("."))


def merge_staged(
    spark: Any,
    table_name: str,
    staged_paths: Sequence[str],
    id_columns: Sequence[str],
    delete_column: str | None,
    properties: Mapping[str, str],
) -> None:
    """MERGE the staged rows into ``table_name`` (``catalog.namespace.table``) keyed by
    ``id_columns`` (dotted paths allowed); ``delete_column`` holds the operation (``D`` deletes), and
    the staged delete marker (a tombstone) deletes too. ``SET *``/``INSERT *`` take the target's
    columns by name, so the marker, which the table lacks, is never written."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    source = spark.read.parquet(*staged_paths)
    order = [
        F.col("_kafka_metadata.timestamp").desc(),
        F.col("_kafka_metadata.partition").desc(),
        F.col("_kafka_metadata.offset").desc(),
    ]
    window = Window.partitionBy(*[F.col(c) for c in id_columns]).orderBy(*order)
    latest = (
        source.withColumn("__tabletopic_rank", F.row_number().over(window))
        .where("__tabletopic_rank = 1")
        .drop("__tabletopic_rank")
    )
    view = f"tabletopic_merge_{uuid.uuid4().hex[:12]}"
    latest.createOrReplaceTempView(view)
    on = " AND ".join(f"t.{_quote(c)} <=> s.{_quote(c)}" for c in id_columns)
    # A tombstone's row is a delete whatever the operation column says (it has none).
    is_delete = f"coalesce(s.{DELETE_MARKER_COLUMN}, false)"
    if delete_column:
        ops = ", ".join(repr(op) for op in DELETE_OPS)
        is_delete = f"({is_delete} OR coalesce(s.{_quote(delete_column)} IN ({ops}), false))"
    sql = (
        f"MERGE INTO {table_name} t USING {view} s ON {on} "
        f"WHEN MATCHED AND {is_delete} THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET * "
        f"WHEN NOT MATCHED AND NOT {is_delete} THEN INSERT *"
    )
    try:
        with commit_properties(spark, properties):
            spark.sql(sql)
    finally:
        spark.catalog.dropTempView(view)
