"""What one table commit costs as the table's history grows: CPU per append, by snapshots kept.

A table topic commits every ``commit.interval.ms`` and keeps its snapshots for
``expire.snapshot.older.than.hours`` (1 h): a one-second interval keeps 3,600. Each commit goes
through ``tabletopic.table.commit.commit_data_files`` (conditional, with the offsets in its summary)
on a pyiceberg SQL catalog (SQLite) and a local warehouse, one small data file each. At each depth
the commits alternate between the pipeline's transaction (``commit.new_transaction``) and
pyiceberg's own ``Transaction``, the baseline, whose every read of the staged metadata deep-copies
the whole history; the table grows by the pipeline's transaction between depths.

Figures are process CPU milliseconds per commit (median of ``--commits`` per arm), then the ratio;
then the manifests of the current snapshot and the time pyiceberg takes to plan a scan of it (what
every reader pays: a fast append, pyiceberg's default, adds a manifest per commit; the pipeline's
appends merge them as Iceberg's Java writers do).

Last, the table's maintenance expiring ``--expire`` snapshots of the deepest table, as it does every
minute (a minute of one-second commits leaves an hour's history each minute): pyiceberg's own
expiry, then the pipeline's (``maintenance.expire_snapshots``), CPU milliseconds each.

Usage: python bench/table_commit_bench.py [--depths 10,100,500,1000] [--commits 5] [--expire 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.io.pyarrow import _dataframe_to_data_files  # noqa: E402
from pyiceberg.manifest import DataFile  # noqa: E402
from pyiceberg.table import Table, Transaction  # noqa: E402

from tabletopic.table import commit  # noqa: E402
from tabletopic.table.maintenance import expire_snapshots  # noqa: E402
from tabletopic.table.table_config import EXPIRE_SNAPSHOT_RETAIN_LAST, TableTopicConfig  # noqa: E402


def one_commit(table: Table, data_file: DataFile, offset: int, baseline: bool) -> float:
    """CPU seconds of one conditional append, as the pipeline commits (baseline: pyiceberg's own
    transaction in place of the pipeline's); ``table`` is read again after it, untimed."""
    made = commit.new_transaction
    if baseline:
        commit.new_transaction = Transaction
    try:
        started = time.process_time()
        planned = commit.committed_state(table)
        commit.commit_data_files(table, [data_file], {0: offset}, planned, epoch=1, topic_id="bench")
        spent = time.process_time() - started
    finally:
        commit.new_transaction = made
    table.refresh()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depths", default="10,100,500,1000", help="snapshots kept, comma list")
    parser.add_argument("--commits", type=int, default=5, help="commits per arm and depth")
    parser.add_argument("--expire", type=int, default=60, help="snapshots each expiry removes")
    args = parser.parse_args()
    depths = sorted(int(d) for d in args.depths.split(","))
    work = Path(tempfile.mkdtemp(prefix="table-commit-bench-"))
    catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}/warehouse")
    catalog.create_namespace("bench")
    rows = pa.table({"id": pa.array(range(10), pa.int64()), "name": pa.array([f"n{i}" for i in range(10)])})
    table = catalog.create_table("bench.orders", schema=rows.schema)
    written = _dataframe_to_data_files(table.metadata, df=rows, io=table.io, write_uuid=uuid.uuid4())
    data_file = next(iter(written))
    offset = 0
    print(f"{'snapshots':>9}  {'pyiceberg ms':>12}  {'pipeline ms':>11}  ratio  manifests  plan ms")
    for depth in depths:
        grow_from = time.perf_counter()
        while len(table.metadata.snapshots) < depth:
            offset += 10
            one_commit(table, data_file, offset, baseline=False)
        grown_s = time.perf_counter() - grow_from
        spent: dict[bool, list[float]] = {True: [], False: []}
        for i in range(2 * args.commits):
            offset += 10
            baseline = i % 2 == 0
            spent[baseline].append(one_commit(table, data_file, offset, baseline))
        ours, theirs = (statistics.median(spent[b]) * 1000 for b in (False, True))
        kept = len(table.metadata.snapshots)
        ratio = theirs / ours
        snapshot = table.current_snapshot()
        manifests = len(snapshot.manifests(table.io)) if snapshot is not None else 0
        planned_from = time.perf_counter()
        sum(1 for _ in table.scan().plan_files())
        plan_ms = (time.perf_counter() - planned_from) * 1000
        print(
            f"{kept:>9}  {theirs:>12.1f}  {ours:>11.1f}  {ratio:4.1f}x  {manifests:>9}  {plan_ms:>7.0f}"
            f"   (grown in {grown_s:.0f} s)"
        )

    print(expiry(table, args.expire))


def expiry(table: Table, count: int) -> str:
    """Expire the oldest ``count`` snapshots with pyiceberg's expiry, then the next ``count`` as
    the pipeline's maintenance does (``maintenance.expire_snapshots``): the CPU of each."""
    table.refresh()
    kept = len(table.metadata.snapshots)
    oldest = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)[:count]
    started = time.process_time()
    table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in oldest]).commit()
    theirs = (time.process_time() - started) * 1000
    table.refresh()
    # Everything is past the age limit an hour from now; all but the newest kept - 2 x count go.
    settings = {EXPIRE_SNAPSHOT_RETAIN_LAST: str(kept - 2 * count)}
    started = time.process_time()
    expired = expire_snapshots(table, TableTopicConfig.from_topic_configs(settings), now=time.time() + 7200)
    ours = (time.process_time() - started) * 1000
    assert expired == count, expired
    ratio = theirs / ours
    figures = f"pyiceberg {theirs:,.0f} ms, pipeline {ours:,.0f} ms  {ratio:.1f}x"
    return f"expiring {count} of {kept:,} snapshots: {figures}"


if __name__ == "__main__":
    main()
