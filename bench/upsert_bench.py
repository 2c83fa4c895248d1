"""Upsert figures: a ``--batch``-row batch (half existing keys) applied to a ``--keys``-row table, the
way the pipeline does it, beside Spark's ``MERGE INTO`` (the previous mechanism) on the same rows.

Set-up is fast: the table's rows are built as Arrow and appended by pyiceberg (Parquet written by
pyarrow, one commit) through the node's own catalog kind (built-in catalog fronted by the embedded
REST catalog, so Spark sees the same table). Then:

1. position-delete commit (``tabletopic.table.row_delta.commit_upsert``): rows/s and time split of
   the first commit (every key column read) and of later ones (key cache warm, as on a running node);
2. ``MERGE INTO`` (the previous mechanism, kept here as the baseline: the batch's latest row per key by
   a window, then one merge-on-read MERGE) of the same batch into an identical table: rows/s, ratio;
3. read cost as deletes accumulate: Spark ``count(*)`` and a pyiceberg scan of the key column after
   1 and ``--commits`` upsert commits, and after maintenance (``rewrite_position_delete_files``,
   then ``rewrite_data_files`` with ``delete-file-threshold``);
4. correctness: one row per key, every batch row's value visible (Spark and pyiceberg).

The machine is shared with other work: absolute figures are rough, ratios are the signal.

Usage: python bench/upsert_bench.py [--keys 10000000] [--batch 100000] [--commits 10] [--skip-merge]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

META = pa.struct([("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64())])


def rows(ids: np.ndarray, name_prefix: str, amount: float, offset0: int, stamp: int) -> pa.Table:
    n = len(ids)
    offsets = np.arange(offset0, offset0 + n, dtype=np.int64)
    names = pa.compute.binary_join_element_wise(name_prefix, pa.array(ids).cast(pa.string()), "")
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": names,
            "amount": pa.array(np.full(n, amount)),
            "_kafka_metadata": pa.StructArray.from_arrays(
                [
                    pa.array(np.zeros(n, dtype=np.int32)),
                    pa.array(offsets),
                    pa.array(np.full(n, stamp, np.int64)),
                ],
                fields=list(META),
            ),
        }
    )


def merge_into(spark: Any, table_name: str, staged_path: str) -> None:
    """The previous upsert mechanism: latest row per key (window over timestamp, partition,
    offset), then ``MERGE INTO`` matching on ``id`` (merge-on-read position deletes)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    source = spark.read.parquet(staged_path)
    order = [F.col(f"_kafka_metadata.{c}").desc() for c in ("timestamp", "partition", "offset")]
    window = Window.partitionBy(F.col("id")).orderBy(*order)
    latest = source.withColumn("__rank", F.row_number().over(window)).where("__rank = 1").drop("__rank")
    view = f"upsert_batch_{uuid.uuid4().hex[:8]}"
    latest.createOrReplaceTempView(view)
    try:
        spark.sql(
            f"MERGE INTO {table_name} t USING {view} s ON t.id <=> s.id "
            "WHEN MATCHED AND s.__tabletopic_delete THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET * "
            "WHEN NOT MATCHED AND NOT s.__tabletopic_delete THEN INSERT *"
        )
    finally:
        spark.catalog.dropTempView(view)


def catalog(work: Path) -> Any:
    from tabletopic import database
    from tabletopic.catalog.adapters import catalog_spec, create_catalog
    from tabletopic.catalog.component import rest_app_for
    from tabletopic.catalog.rest.embedded import EmbeddedRestCatalog
    from tabletopic.config import Config

    config = Config({"data.dir": str(work)})
    work.mkdir(parents=True, exist_ok=True)
    spec = catalog_spec(config)
    engine = database.create_engine(database.default_url(work))
    backing = create_catalog(spec, engine)
    rest = EmbeddedRestCatalog(rest_app_for(backing, spec)).start()
    return backing, spec.with_rest_uri(rest.uri), rest


def build_table(cat: Any, name: str, keys: int) -> tuple[Any, float]:
    from tabletopic.table.tables import MERGE_ON_READ

    began = time.monotonic()
    template = rows(np.arange(1, dtype=np.int64), "name-", 0.0, 0, 0)
    table = cat.create_table(
        ("ns", name), template.schema, properties={"format-version": "2", **MERGE_ON_READ}
    )
    step = 1_000_000
    with table.transaction() as tx:
        for start in range(0, keys, step):
            ids = np.arange(start, min(keys, start + step), dtype=np.int64)
            tx.append(rows(ids, "name-", 1.0, start, 0))
    return cat.load_table(("ns", name)), time.monotonic() - began


def batch(keys: int, size: int, round_: int) -> pa.Table:
    existing = size // 2
    rng = np.random.default_rng(round_)
    old = rng.choice(keys, existing, replace=False).astype(np.int64)
    new = np.arange(keys + round_ * size, keys + round_ * size + size - existing, dtype=np.int64)
    ids = np.concatenate([old, new])
    rng.shuffle(ids)
    table = rows(ids, f"new{round_}-", -1.0 - round_, keys + round_ * size, 1 + round_)
    return table.append_column("__tabletopic_delete", pa.array(np.zeros(len(ids), dtype=bool)))


def upsert_commit(cat: Any, name: str, data: pa.Table, cache: Any = None) -> tuple[float, Any]:
    """One upsert commit the pipeline's way; ``cache`` is the node's key cache (None: every key
    column read, as on a node's first commit to the table)."""
    from tabletopic.table.commit import committed_state
    from tabletopic.table.row_delta import commit_upsert

    table = cat.load_table(("ns", name))
    began = time.monotonic()
    _, stats = commit_upsert(table, data, ["id"], None, committed_state(table), {}, cache)
    return time.monotonic() - began, stats


def read_cost(spark: Any, cat: Any, spark_name: str, name: str) -> tuple[float, float]:
    began = time.monotonic()
    spark.sql(f"SELECT count(*), max(amount) FROM {spark_name}").collect()
    spark_s = time.monotonic() - began
    began = time.monotonic()
    cat.load_table(("ns", name)).scan(selected_fields=("id", "amount")).to_arrow()
    return spark_s, time.monotonic() - began


def check(
    spark: Any, cat: Any, spark_name: str, name: str, expected_rows: int, changed: dict[int, str]
) -> None:
    row = spark.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS d FROM {spark_name}").first()
    assert row.n == row.d == expected_rows, (row, expected_rows)
    data = cat.load_table(("ns", name)).scan(selected_fields=("id", "name")).to_arrow()
    assert data.num_rows == expected_rows, (data.num_rows, expected_rows)
    sample = dict(list(changed.items())[:2000])
    found = data.filter(pa.compute.is_in(data.column("id"), pa.array(list(sample))))
    got = dict(zip(found.column("id").to_pylist(), found.column("name").to_pylist(), strict=True))
    assert got == sample, "latest row per key differs"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--skip-merge", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="upsert-bench-"))
    print(f"work dir {work}; load {os.getloadavg()}; machine shared with other work", flush=True)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    from tabletopic.catalog.adapters import spark_catalog_conf, spark_catalog_properties
    from tabletopic.config import Config
    from tabletopic.spark.session import get_spark, stop_spark

    cat, spec, rest = catalog(work / "node")
    cat.create_namespace("ns")
    spark = get_spark(
        Config({"data.dir": str(work / "spark"), "spark.master": "local[2]"}),
        spark_catalog_conf("bench", spark_catalog_properties(spec)),
    )
    # Iceberg's rewrite procedures resolve the table in the current catalog (as in a node, where the
    # node's catalog is the default one).
    spark.catalog.setCurrentCatalog("bench")
    try:
        _, load_s = build_table(cat, "upsert_rd", args.keys)
        say(f"set-up: {args.keys:,}-row table appended by pyiceberg in {load_s:.1f}s")
        from tabletopic.table import settings
        from tabletopic.table.key_index import KeyCache

        cache = KeyCache(settings.UPSERT_KEY_CACHE_BYTES.default)
        first = batch(args.keys, args.batch, 0)
        seconds, stats = upsert_commit(cat, "upsert_rd", first, cache)
        split = "  ".join(f"{k} {v:.2f}s" for k, v in stats.timings.items())
        rd_rate = args.batch / seconds
        say(
            f"position-delete commit, first (key cache cold): {rd_rate:>9,.0f} rows/s "
            f"({args.batch:,} rows, {seconds:.2f}s; "
            f"{stats.deleted:,} rows replaced, {stats.inserted:,} written; "
            f"files looked up {stats.files_scanned}, "
            f"read {stats.files_read}, "
            f"skipped by bounds {stats.files_skipped}; {split}) load {os.getloadavg()[0]:.1f}"
        )
        expected = args.keys + args.batch - args.batch // 2
        changed = dict(zip(first.column("id").to_pylist(), first.column("name").to_pylist(), strict=True))
        check(spark, cat, "bench.ns.upsert_rd", "upsert_rd", expected, changed)
        one = read_cost(spark, cat, "bench.ns.upsert_rd", "upsert_rd")
        if not args.skip_merge:
            build_table(cat, "upsert_merge", args.keys)
            path = work / f"batch-{uuid.uuid4().hex}.parquet"
            import pyarrow.parquet as pq

            pq.write_table(first, path)
            began = time.monotonic()
            merge_into(spark, "bench.ns.upsert_merge", str(path))
            merge_s = time.monotonic() - began
            say(
                f"MERGE INTO (previous mechanism): {args.batch / merge_s:>9,.0f} rows/s ({merge_s:.2f}s) "
                f"load {os.getloadavg()[0]:.1f}; "
                f"position-delete commit / MERGE = {rd_rate / (args.batch / merge_s):.1f}x"
            )
            check(spark, cat, "bench.ns.upsert_merge", "upsert_merge", expected, changed)
            spark.sql("DROP TABLE bench.ns.upsert_merge")
        rates: list[float] = []
        splits: list[dict[str, float]] = []
        for round_ in range(1, args.commits):
            data = batch(args.keys, args.batch, round_)
            seconds, stats = upsert_commit(cat, "upsert_rd", data, cache)
            splits.append(stats.timings)
            rates.append(args.batch / seconds)
            changed.update(zip(data.column("id").to_pylist(), data.column("name").to_pylist(), strict=True))
            expected += args.batch - args.batch // 2
        if rates:
            say(
                f"commits 2..{args.commits}: median {sorted(rates)[len(rates) // 2]:,.0f} rows/s, "
                f"min {min(rates):,.0f} (key cache warm, {cache.size / 2**20:.0f} MiB; deletes accumulating; "
                f"last split {'  '.join(f'{k} {v:.2f}s' for k, v in splits[-1].items())}) "
                f"load {os.getloadavg()[0]:.1f}"
            )
        check(spark, cat, "bench.ns.upsert_rd", "upsert_rd", expected, changed)
        many = read_cost(spark, cat, "bench.ns.upsert_rd", "upsert_rd")
        began = time.monotonic()
        spark.sql("CALL bench.system.rewrite_position_delete_files(table => 'ns.upsert_rd')").collect()
        rpd_s = time.monotonic() - began
        merged = read_cost(spark, cat, "bench.ns.upsert_rd", "upsert_rd")
        began = time.monotonic()
        spark.sql(
            "CALL bench.system.rewrite_data_files(table => 'ns.upsert_rd', "
            "options => map('min-input-files', '5', 'delete-file-threshold', '1'))"
        ).collect()
        rdf_s = time.monotonic() - began
        compacted = read_cost(spark, cat, "bench.ns.upsert_rd", "upsert_rd")
        check(spark, cat, "bench.ns.upsert_rd", "upsert_rd", expected, changed)
        say(
            "read (Spark count+max / pyiceberg scan of 2 columns): "
            f"after 1 commit {one[0]:.2f}s / {one[1]:.2f}s; "
            f"after {args.commits} {many[0]:.2f}s / {many[1]:.2f}s; "
            f"after rewrite_position_delete_files ({rpd_s:.1f}s) {merged[0]:.2f}s / {merged[1]:.2f}s; "
            f"after rewrite_data_files ({rdf_s:.1f}s) {compacted[0]:.2f}s / {compacted[1]:.2f}s"
        )
        seconds, stats = upsert_commit(cat, "upsert_rd", batch(args.keys, args.batch, args.commits), cache)
        say(
            f"commit after compaction (its new files read once): {args.batch / seconds:,.0f} rows/s "
            f"load {os.getloadavg()[0]:.1f}"
        )
    finally:
        stop_spark()
        rest.stop()
    print("\n== summary (machine shared with other work) ==")
    for text in lines:
        print(text)


if __name__ == "__main__":
    main()
