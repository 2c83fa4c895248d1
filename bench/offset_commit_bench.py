"""What a consumer group's offset commit costs the coordinator's database thread, on SQLite (a
single node's default) and on PostgreSQL (a cluster's), in one run.

An auto-committing consumer sends every assigned partition's offset every
``auto.commit.interval.ms`` (5 s), changed or not; with 1,200 partitions that is 1,200 rows per
commit. Each figure is one ``GroupStore.commit_offsets`` of ``--partitions`` offsets that all exist
already (the steady state: every row is replaced), timed in wall seconds and in this process's CPU
seconds (the write holds the GIL for most of it, so its CPU is what the broker's event loop loses).

The same-run baseline is the floor: one INSERT of the same rows into an empty table of the same
shape (no row to find or replace), on the same database. The ratio says how far above that floor a
commit runs.

Usage: python bench/offset_commit_bench.py [--partitions 1200] [--commits 40] [--no-postgres]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa
from percentiles import nearest_rank

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabletopic import database  # noqa: E402
from tabletopic.broker.groups.store import CommittedOffset, GroupStore, offset_rows, offsets_table  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402

Offsets = dict[tuple[str, int], CommittedOffset]


def offsets(partitions: int, commit: int) -> Offsets:
    """The ``commit``-th commit of a group reading 100-partition topics: a third of its partitions
    moved since the last one."""
    return {
        (f"topic-{p // 100}", p % 100): CommittedOffset(commit * 10 + (p % 3 == 0), -1, "", 1_000 + commit)
        for p in range(partitions)
    }


def timed(prepare: Callable[[int], Callable[[], None]], commits: int) -> tuple[float, float]:
    """p50 wall and CPU seconds of the write ``prepare(commit)`` returns (what it builds first is not
    timed), over ``commits`` writes; the first three (warm-up: connections, compiled statements)
    are left out."""
    walls, cpus = [], []
    for commit in range(commits + 3):
        write = prepare(commit)
        wall, cpu = time.perf_counter(), time.process_time()
        write()
        if commit >= 3:
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    return nearest_rank(walls, 0.5), nearest_rank(cpus, 0.5)


def measure(label: str, url: str, partitions: int, commits: int) -> None:
    engine = database.create_engine(url)
    store = GroupStore(engine)
    store.migrate()
    floor_table = offsets_table.to_metadata(sa.MetaData(), name="bench_offsets_floor")
    with engine.begin() as conn:
        floor_table.drop(conn, checkfirst=True)
        floor_table.create(conn)

    def commit(n: int) -> Callable[[], None]:
        committed = offsets(partitions, n)
        return lambda: store.commit_offsets("bench-group", committed)

    def insert_into_empty(n: int) -> Callable[[], None]:
        with engine.begin() as conn:
            conn.execute(sa.delete(floor_table))
        committed = offsets(partitions, n)

        def write() -> None:
            rows = offset_rows("bench-group", committed)
            with engine.begin() as conn:
                conn.execute(sa.insert(floor_table), rows)

        return write

    floor_wall, floor_cpu = timed(insert_into_empty, commits)
    wall, cpu = timed(commit, commits)
    stored = store.load().offsets["bench-group"]
    assert len(stored) == partitions, f"{len(stored)} offsets stored, {partitions} committed"
    engine.dispose()
    print(
        f"{label:<10} commit of {partitions} offsets: p50 {wall * 1e3:6.1f} ms wall, {cpu * 1e3:6.1f} ms CPU"
        f" | floor (insert into an empty table) {floor_wall * 1e3:6.1f} ms wall,"
        f" {floor_cpu * 1e3:6.1f} ms CPU"
        f" | ratio {wall / floor_wall:.2f} wall, {cpu / floor_cpu:.2f} CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=1200, help="offsets in every commit")
    parser.add_argument("--commits", type=int, default=40, help="commits timed per database")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="offset-commit-bench-") as directory:
        measure("sqlite", database.default_url(Path(directory)), args.partitions, args.commits)
    if args.no_postgres:
        return
    server = PostgresServer().start()
    try:
        measure("postgresql", server.url, args.partitions, args.commits)
    finally:
        server.shut_down()


if __name__ == "__main__":
    main()
