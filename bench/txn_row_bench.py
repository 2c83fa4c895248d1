"""The cost of writing one transaction row, the write a transactional producer waits for twice per
transaction (AddPartitionsToTxn and EndTxn are answered once it is durable): through asyncio's
default executor with a pool checkout per write (the way before the row writer), against the
coordinator's row writer (one thread, one connection kept open). SQLite in the data directory's
file system, ``synchronous=FULL`` as the broker runs it, then ``NORMAL`` to show the hand-over cost
without the fsync. The runs alternate so a drift in the machine's load weighs on both alike.

Usage: python bench/txn_row_bench.py [--writes 2000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from percentiles import nearest_rank

from tabletopic import database
from tabletopic.broker.transactions.model import TxnState
from tabletopic.broker.transactions.row_writer import RowWriter
from tabletopic.broker.transactions.store import TxnMetadata, TxnPartition, TxnStore, row_of


async def timed(write: Callable[[], Awaitable[None]], count: int) -> list[float]:
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        await write()
        seconds.append(time.perf_counter() - started)
    return seconds


async def measure(directory: Path, synchronous: str, writes: int) -> None:
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        engine = database.create_engine(f"sqlite:///{tmp}/metadata.db", sqlite_synchronous=synchronous)
        store = TxnStore(engine)
        store.migrate()
        txn = TxnMetadata(
            "bench", 1, 0, TxnState.ONGOING, 60_000, 1, 1, {("t", 0): TxnPartition("t", 0, 1, 0)}
        )
        store.save(txn)
        writer = RowWriter(engine, "bench-rows")
        row = row_of(txn)

        async def pooled() -> None:
            await asyncio.to_thread(store.save, txn)

        async def dedicated() -> None:
            await writer.run(lambda conn: store.write_row(conn, "bench", row, None))

        ways = {"executor + pool": pooled, "row writer": dedicated}
        runs: dict[str, list[float]] = {name: [] for name in ways}
        for name in (*ways, *reversed(ways)):
            await timed(ways[name], writes // 10)  # warm-up
            runs[name] += await timed(ways[name], writes // 2)
        await writer.close()
        engine.dispose()
    p50 = {name: statistics.median(values) * 1e6 for name, values in runs.items()}
    for name, values in runs.items():
        p99 = nearest_rank(values, 0.99) * 1e6
        mean = statistics.mean(values) * 1e6
        print(
            f"  synchronous={synchronous:<6} {name:<16} "
            f"p50 {p50[name]:7.1f} us   p99 {p99:7.1f} us   mean {mean:7.1f} us"
        )
    ratio = p50["row writer"] / p50["executor + pool"]
    print(f"  synchronous={synchronous:<6} row writer / executor + pool (p50): {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    print(f"transaction row writes, {args.writes} per way, SQLite under {args.dir}")
    for synchronous in ("FULL", "NORMAL"):
        asyncio.run(measure(args.dir, synchronous, args.writes))


if __name__ == "__main__":
    main()
