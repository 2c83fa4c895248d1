"""Catalog figures: commits per second through the built-in REST catalog (pyiceberg client over HTTP,
the server in this process on a background thread) for SQLite and PostgreSQL backing; then the Spark
session's start time and first-query latency against the same catalog.

Commit kinds:
  properties  metadata-only commit (set-properties): catalog + metadata-file cost alone;
  append      one-row append (Parquet file + manifest + manifest list + metadata): a pipeline commit;
  2 writers   two threads appending to one table, retrying on 409: commits landed per second.

Usage: python bench/catalog_bench.py [--commits 100] [--no-postgres] [--no-spark]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException

from tabletopic import database
from tabletopic.catalog.adapters import catalog_spec, create_catalog
from tabletopic.catalog.component import rest_app_for
from tabletopic.catalog.rest.embedded import EmbeddedRestCatalog
from tabletopic.config import Config

SCHEMA = pa.schema([("writer", pa.string()), ("n", pa.int64())])
NO_RETRY = {"commit.retry.num-retries": "0"}


@contextmanager
def builtin_catalog(data_dir: Path, metadata_url: str | None) -> Iterator[tuple[Config, str, Catalog]]:
    values: dict[str, Any] = {"data.dir": str(data_dir)}
    if metadata_url:
        values["metadata.url"] = metadata_url
    config = Config(values)
    spec = catalog_spec(config)
    engine = database.create_engine(metadata_url or database.default_url(config.data_dir))
    backing = create_catalog(spec, engine)
    server = EmbeddedRestCatalog(rest_app_for(backing, spec)).start()
    try:
        yield config, server.uri, backing
    finally:
        server.stop()
        engine.dispose()


def rate(label: str, count: int, work: Callable[[int], None]) -> float:
    started = time.perf_counter()
    for i in range(count):
        work(i)
    elapsed = time.perf_counter() - started
    per_second = count / elapsed
    print(f"  {label:<28} {per_second:8.1f} commits/s  ({elapsed / count * 1000:6.1f} ms each, n={count})")
    return per_second


def bench_commits(uri: str, commits: int) -> dict[str, float]:
    client = RestCatalog("bench", uri=uri)
    client.create_namespace("bench")
    table = client.create_table("bench.props", SCHEMA, properties=NO_RETRY)
    results: dict[str, float] = {}

    def set_property(i: int) -> None:
        nonlocal table
        with table.transaction() as tx:
            tx.set_properties({"round": str(i)})

    results["properties"] = rate("properties (metadata only)", commits, set_property)
    appended = client.create_table("bench.appends", SCHEMA, properties=NO_RETRY)
    row = pa.table({"writer": ["w"], "n": pa.array([1], pa.int64())}, schema=SCHEMA)
    results["append"] = rate("append (1 row)", max(commits // 2, 10), lambda _i: appended.append(row))

    client.create_table("bench.race", SCHEMA, properties=NO_RETRY)
    per_writer = max(commits // 4, 5)
    conflicts = [0]

    def writer(name: str) -> None:
        own = RestCatalog(f"w-{name}", uri=uri)
        for i in range(per_writer):
            batch = pa.table({"writer": [name], "n": pa.array([i], pa.int64())}, schema=SCHEMA)
            while True:
                try:
                    own.load_table("bench.race").append(batch)
                    break
                except CommitFailedException:
                    conflicts[0] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    landed = len(client.load_table("bench.race").metadata.snapshots)
    assert landed == 2 * per_writer, f"lost commits: {landed} != {2 * per_writer}"
    results["race"] = landed / elapsed
    print(
        f"  {'2 writers, append + retry':<28} {landed / elapsed:8.1f} commits/s  "
        f"({conflicts[0]} conflicts retried, {landed} landed, none lost)"
    )
    return results


def bench_spark(config: Config, uri: str) -> None:
    from tabletopic.catalog.adapters import spark_catalog_conf, spark_catalog_properties
    from tabletopic.spark.session import get_spark, stop_spark

    client = RestCatalog("bench", uri=uri)
    client.create_namespace_if_not_exists("q")
    table = client.create_table("q.events", SCHEMA)
    table.append(pa.table({"writer": ["x"] * 1000, "n": pa.array(range(1000), pa.int64())}, schema=SCHEMA))
    spec = catalog_spec(config).with_rest_uri(uri)
    conf = spark_catalog_conf(spec.name, spark_catalog_properties(spec))
    started = time.perf_counter()
    spark = get_spark(config, conf, spec.name)
    ready = time.perf_counter() - started
    started = time.perf_counter()
    total = spark.sql("SELECT sum(n) AS s FROM q.events").collect()[0].s
    first = time.perf_counter() - started
    started = time.perf_counter()
    spark.sql("SELECT sum(n) AS s FROM q.events").collect()
    second = time.perf_counter() - started
    assert total == sum(range(1000))
    print(f"  session start (JVM + Iceberg)  {ready:6.2f} s")
    print(f"  first query (load + scan)      {first:6.2f} s")
    print(f"  same query again               {second:6.2f} s")
    stop_spark()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="catalog-bench-"))
    try:
        print("built-in REST catalog, SQLite metadata DB (pyiceberg REST client):")
        with builtin_catalog(root / "sqlite", None) as (config, uri, _backing):
            bench_commits(uri, args.commits)
            if not args.no_spark:
                print("Spark against the same catalog:")
                bench_spark(config, uri)
        if not args.no_postgres:
            from tests.support.postgres import PostgresServer, postgres_bin_dir

            if postgres_bin_dir() is None:
                print("PostgreSQL not installed: skipped")
                return
            server = PostgresServer().start()
            try:
                url = server.create_database("catalog_bench")
                print("built-in REST catalog, PostgreSQL metadata DB (pyiceberg REST client):")
                with builtin_catalog(root / "pg", url) as (_config, uri, _backing):
                    bench_commits(uri, args.commits)
            finally:
                server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
