"""Fresh reads in Spark: a table topic's table as its next commit will leave it, as a DataFrame.

The same read as ``tabletopic sql --fresh`` (:mod:`tabletopic.table.ops.fresh`), composed by Spark:
the committed snapshot is read by Spark itself at the snapshot the tail continues (``snapshot-id``,
so a commit landing meanwhile cannot count a record twice), and only the tail — the records above
that snapshot's offsets, converted by the commit's converter on the driver — travels to Spark, as
Arrow batches (``mapInArrow``, which takes nested structs, maps and lists as they are). On an upsert
or CDC table the snapshot's rows whose key the tail changed are left out first (an anti join on the
merge keys), then the tail's latest rows are added.

From PySpark, with a session that has the platform's catalog registered (``tabletopic sql
--print-config`` shows the settings)::

    from tabletopic.spark.fresh import fresh_table
    fresh_table(spark, "default.orders").groupBy("status").count().show()
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tabletopic.config import Config

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tabletopic.table.ops.fresh import FreshTail


def fresh_table(
    spark: SparkSession, table: str, cfg: Config | None = None, spark_catalog: str | None = None
) -> DataFrame:
    """``table`` (``namespace.name``, a table topic's table) with the records not yet committed.

    Args:
        spark: a session with the platform's catalog registered.
        cfg: the node's configuration (default: found as every client command finds it).
        spark_catalog: the name the session registered the catalog under (default: the
            catalog's own name, as ``tabletopic sql --print-config`` registers it).

    Raises:
        ValueError: no table topic writes ``table``, or records of the tail cannot be converted.
    """
    from tabletopic.catalog.adapters import catalog_spec
    from tabletopic.cli_common import load_config
    from tabletopic.table.ops.access import bootstrap_servers, open_catalog, record_converter
    from tabletopic.table.ops.fresh import fresh_tail, table_topics

    cfg = cfg or load_config(None, None, None)
    namespace, _, name = table.rpartition(".")
    servers = bootstrap_servers(cfg)
    found = table_topics(servers).get((namespace or "default", name))
    if found is None:
        raise ValueError(f"no table topic writes the table {table}")
    topic, config = found
    with ExitStack() as stack:
        tail = fresh_tail(servers, open_catalog(cfg, stack), topic, config, record_converter(cfg, config))
    catalog = spark_catalog or catalog_spec(cfg).name
    return compose(spark, f"{catalog}.{namespace or 'default'}.{name}", tail)


def compose(spark: SparkSession, spark_table: str, tail: FreshTail) -> DataFrame:
    """The snapshot ``tail`` continues, read by Spark, less the rows whose key the tail changed,
    plus the tail's rows."""
    reader = spark.read
    if tail.snapshot_id:
        reader = reader.option("snapshot-id", str(tail.snapshot_id))
    committed = reader.table(spark_table)
    if not tail.snapshot_id:  # nothing committed yet: the table's columns, no rows
        committed = committed.limit(0)
    if tail.replaced is not None and tail.replaced.num_rows:
        committed = _without_keys(spark, committed, tail)
    return committed.unionByName(arrow_frame(spark, tail.rows, committed.schema))


def arrow_frame(spark: SparkSession, rows: pa.Table, schema: Any) -> DataFrame:
    """``rows`` as a DataFrame of Spark ``schema`` (the table's columns, in its order), through
    Arrow: the driver's table is shipped in the function's closure to one task that yields it."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(schema)
    batches = rows.select(target.names).cast(target).to_batches() if rows.num_rows else []

    def emit(_: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        yield from batches

    return spark.range(1).mapInArrow(emit, schema)


def _without_keys(spark: SparkSession, committed: DataFrame, tail: FreshTail) -> DataFrame:
    """``committed`` less its rows whose key is one of ``tail.replaced``'s (a left anti join on the
    merge keys; nested keys by their dotted paths)."""
    from pyspark.sql import functions as f

    from tabletopic.table.key_index import key_arrays

    assert tail.replaced is not None
    names = [f"__tabletopic_key_{i}" for i in range(len(tail.keys))]
    keys = pa.table(dict(zip(names, key_arrays(tail.replaced, tail.keys), strict=True)))
    left = committed.select("*", *(f.col(path).alias(n) for path, n in zip(tail.keys, names, strict=True)))
    right_schema = left.select(*names).schema
    changed = arrow_frame(spark, keys, right_schema)
    return left.join(changed, on=names, how="left_anti").drop(*names)
