"""Upsert/CDC write mode: copy-on-write vs merge-on-read MERGE INTO, measured side by side.

A table of ``--keys`` rows receives ``--batches`` upsert batches of ``--batch-rows`` rows each (a
fraction updates existing keys, the rest inserts, a few deletes), applied the way the table pipeline
applies them (``tabletopic.spark.merge.merge_staged``). Prints per mode: mean MERGE time, files after,
full-scan time after; then the MoR/CoW ratios.

    .venv/bin/python bench/upsert_bench.py [--keys 200000] [--batches 5] [--batch-rows 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import pyarrow.parquet as pq

from tabletopic.config import Config
from tabletopic.spark.merge import merge_staged
from tabletopic.spark.session import get_spark

MODES = {
    "copy-on-write": {},
    "merge-on-read": {
        "write.merge.mode": "merge-on-read",
        "write.update.mode": "merge-on-read",
        "write.delete.mode": "merge-on-read",
    },
}


def rows(keys: range, version: int, op: str) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            "id": pa.array(list(keys), pa.int64()),
            "name": pa.array([f"name-{k}-{version}" for k in keys]),
            "amount": pa.array([float(k % 1000) + version for k in keys]),
            "op": pa.array([op] * n),
            "_kafka_metadata": pa.array(
                [
                    {"partition": 0, "offset": version * 10_000_000 + i, "timestamp": version}
                    for i in range(n)
                ],
                pa.struct([("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64())]),
            ),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--batch-rows", type=int, default=20_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-upsert-bench-"))
    spark = get_spark(Config({"data.dir": str(work), "spark.master": "local[2]"}))
    catalog = "bench"
    spark.conf.set(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"spark.sql.catalog.{catalog}.type", "hadoop")
    spark.conf.set(f"spark.sql.catalog.{catalog}.warehouse", f"file://{work}/warehouse")
    results: dict[str, dict[str, float]] = {}
    for mode, props in MODES.items():
        table = f"{catalog}.db.t_{mode.replace('-', '_')}"
        tblprops = ", ".join(f"'{k}'='{v}'" for k, v in {"format-version": "2", **props}.items())
        spark.sql(
            f"CREATE TABLE {table} (id bigint, name string, amount double, op string, "
            f"_kafka_metadata struct<partition:int, offset:bigint, timestamp:bigint>) "
            f"USING iceberg TBLPROPERTIES ({tblprops})"
        )
        initial = work / f"initial-{mode}.parquet"
        pq.write_table(rows(range(args.keys), 0, "I"), initial)
        merge_staged(spark, table, [str(initial)], ["id"], "op", {})
        durations = []
        for b in range(1, args.batches + 1):
            updates = max(args.batch_rows * 7 // 10, 1)
            start_key = (b * 7919) % max(args.keys - updates, 1)
            upd = rows(range(start_key, start_key + updates), b, "U")
            ins = rows(
                range(
                    args.keys + b * args.batch_rows,
                    args.keys + b * args.batch_rows + args.batch_rows - updates - 10,
                ),
                b,
                "I",
            )
            dels = rows(range(b * 10, b * 10 + 10), b, "D")
            path = work / f"batch-{mode}-{b}-{uuid.uuid4().hex}.parquet"
            pq.write_table(pa.concat_tables([upd, ins, dels]), path)
            started = time.perf_counter()
            merge_staged(spark, table, [str(path)], ["id"], "op", {})
            durations.append(time.perf_counter() - started)
        started = time.perf_counter()
        count = spark.sql(f"SELECT count(*) AS n, sum(amount) AS s FROM {table}").first()
        scan = time.perf_counter() - started
        files = spark.sql(f"SELECT count(*) AS n FROM {table}.files").first().n
        results[mode] = {
            "merge_s": statistics.mean(durations),
            "scan_s": scan,
            "files": files,
            "rows": count.n,
        }
        print(
            f"{mode:14s} merge mean {results[mode]['merge_s']:.2f}s  "
            f"files after {files}  full scan {scan:.2f}s  rows {count.n}"
        )
    cow, mor = results["copy-on-write"], results["merge-on-read"]
    merge_ratio = mor["merge_s"] / cow["merge_s"]
    scan_ratio = mor["scan_s"] / cow["scan_s"]
    print(f"merge time MoR/CoW: {merge_ratio:.2f}   scan time MoR/CoW: {scan_ratio:.2f}")
    assert cow["rows"] == mor["rows"], "both modes must end with the same rows"


if __name__ == "__main__":
    main()
