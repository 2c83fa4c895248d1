"""What a broker's poll of the cluster metadata costs it, on PostgreSQL, beside the round trips alone.

Every broker reads ``ClusterMetadata.snapshot`` four times a heartbeat (``broker.heartbeat.interval.ms``
/ 4: every 125 ms on the test cluster's 500 ms, every 250 ms on the default second), whether anything
changed or not: leases run out without a write. When the cluster version has not moved, a poll is
one REPEATABLE READ transaction of four small reads (the brokers, the controller row, the version,
the open shared WALs) and no partition row. This bench registers ``--brokers`` brokers and times
``--polls`` such polls in this process's CPU and in wall time.

The same-run baseline is the floor: the same transaction with four ``SELECT 1`` (the round trips and
the driver, no table, no statement to build). The ratio says how far above it a poll runs; the rest
is SQLAlchemy's work per statement and turning rows into the snapshot.

Usage: python bench/metadata_poll_bench.py [--brokers 3] [--polls 2000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabletopic import database  # noqa: E402
from tabletopic.cluster.db import ClusterMetadata  # noqa: E402
from tabletopic.ids import NodeId  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402


def timed(polls: int, poll: Callable[[], object]) -> tuple[float, float]:
    """Microseconds of CPU and of wall time per call, the better of three rounds."""
    rounds = []
    for _ in range(3):
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(polls):
            poll()
        rounds.append(((time.process_time() - cpu) / polls * 1e6, (time.perf_counter() - wall) / polls * 1e6))
    return min(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--polls", type=int, default=2000)
    args = parser.parse_args()
    postgres = PostgresServer(keep=False).start()
    try:
        engine = database.create_engine(postgres.create_database("metadata_poll_bench"))
        meta = ClusterMetadata(engine)
        meta.migrate()
        for node in range(1, args.brokers + 1):
            endpoints = {"PLAINTEXT": ("127.0.0.1", 9000 + node), "INTERNAL": ("127.0.0.1", 9100 + node)}
            meta.register(NodeId(node), "a", endpoints, 30)
        last = [meta.snapshot()]

        def poll() -> None:
            last[0] = meta.snapshot(last[0])

        def floor() -> None:
            with engine.connect() as conn:
                conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    for _ in range(4):
                        conn.exec_driver_sql("SELECT 1").first()

        timed(200, poll)  # warm: the pool's connection, prepared statements, SQLAlchemy's cache
        print(
            f"metadata poll bench: {args.brokers} brokers, {args.polls} polls, PostgreSQL on loopback, "
            f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
        )
        floor_cpu, floor_wall = timed(args.polls, floor)
        cpu, wall = timed(args.polls, poll)
        print(
            f"  four SELECT 1 in one transaction (floor)  {floor_cpu:7.0f} us CPU  {floor_wall:7.0f} us wall"
        )
        print(f"  ClusterMetadata.snapshot, nothing changed  {cpu:7.0f} us CPU  {wall:7.0f} us wall")
        ratios = f"{cpu / floor_cpu:7.2f}x CPU {wall / floor_wall:7.2f}x wall"
        print(f"  ratio to the floor                         {ratios}")
        engine.dispose()
    finally:
        postgres.stop()


if __name__ == "__main__":
    main()
