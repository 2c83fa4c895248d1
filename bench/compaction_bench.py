"""How long an s3stream compaction holds the event loop, beside the loop's idle baseline.

A broker's produce and fetch answers, lease renewals and group heartbeats all run on one event
loop. Compaction merges small stream-set objects (up to ``s3stream.compaction.max.object.bytes``
of them at once) by taking every object's blocks per stream (splitting those a stream's start
cuts into batches), ordering them and laying the result out as new objects: CPU work that, done
on the loop, holds every other request until it ends. This bench writes ``--megabytes`` of
``--batch``-byte appends spread over ``--streams`` streams into stream-set objects of
``--object-mb`` each, then runs one compaction pass while a
ticker on the same loop sleeps 1 ms at a time and records how late each wake-up is. It prints the
pass's rate and the loop's longest and p99 stall during the pass, beside the same ticker on the
idle loop (the baseline) and their ratio.

With ``--again-mb``, it then writes that many MiB more and times a second pass, which merges the
first pass's object again with the new ones, however few (as a controller's pass does when the
size tiers carry over; merging every small object every pass, the old choice, did it each time).
The blocks of an older object go into the new one whole, so this pass costs per block, not per
batch.

With ``--rounds N`` it measures the steady state instead: N rounds, each one upload of
``--round-kb`` KiB (``--batch``-byte appends round the streams) and then one pass, as a controller
sees a quiet cluster. It prints the bytes the passes read and rewrote per byte written (the write
amplification), the passes' CPU and the objects left, for size-tiered merging (an object joins a
merge only when the rest hold as much live data) beside merging every small object every pass (the
baseline, how passes chose before), each on a fresh store, in alternating order. Then it opens the
store again (caches cold) and reads ``--catch-up-streams`` streams from their start, one after
another, as a consumer catching up does, with every ranged GET held ``--get-ms`` (an object store's
first-byte latency; the local store answers at once): the GETs per stream and the seconds per
stream, since size-tiered merging leaves more objects standing, and a stream's older data spread
over more of them.

    .venv/bin/python bench/compaction_bench.py
    .venv/bin/python bench/compaction_bench.py --megabytes 256 --batch 200 --streams 1000
    .venv/bin/python bench/compaction_bench.py --megabytes 24 --batch 150 --object-mb 2 --again-mb 2
    .venv/bin/python bench/compaction_bench.py --rounds 200 --round-kb 256 --batch 200
    .venv/bin/python bench/compaction_bench.py --rounds 127 --round-kb 256 --batch 200 --get-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from percentiles import nearest_rank

from tabletopic import database
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.objectstore import LocalObjectStoreSpec, open_object_store
from tabletopic.s3stream.store import S3StreamStore

MiB = 1024 * 1024
TICK_S = 0.001


class Ticker:
    """Sleeps ``TICK_S`` over and over on the loop and keeps how late each wake-up came."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.lags.append(time.perf_counter() - asked - TICK_S)

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()

    def summary(self) -> tuple[float, float, float]:
        """Longest stall, p99 stall (ms) and the seconds the loop spent more than 10 ms late."""
        late = sum(lag for lag in self.lags if lag > 0.010)
        return nearest_rank(self.lags, 1.0) * 1000, nearest_rank(self.lags, 0.99) * 1000, late


def open_store(root: Path) -> S3StreamStore:
    settings = StoreSettings(
        wal_dir=root / "wal",
        compaction_interval_ms=0,
        compaction_rate=8 * 1024 * MiB,  # the rate limit is not what is measured
        delete_grace_ms=3_600_000,
        log_cache_bytes=64 * MiB,
    )
    engine = database.create_engine(database.default_url(root))
    return S3StreamStore(settings, engine, open_object_store(LocalObjectStoreSpec(str(root / "objects"))))


async def run(args: argparse.Namespace, root: Path) -> None:
    store = open_store(root)
    await store.start()
    gc.collect()  # as a node does once it is up (tabletopic.platform): start-up objects frozen
    gc.freeze()
    try:
        streams = await store.create_streams(args.streams)
        await write(store, streams, args.batch, args.object_mb, args.megabytes)
        print(
            f"compaction bench: {args.megabytes} MiB in {args.batch} B batches over {args.streams} streams, "
            f"stream-set objects of {args.object_mb} MiB, {os.cpu_count()} cores, "
            f"load {os.getloadavg()[0]:.2f}"
        )
        with Ticker() as idle:
            await asyncio.sleep(1.0)
        idle_max, idle_p99, _ = idle.summary()
        print(f"  idle loop (baseline)     longest stall {idle_max:8.2f} ms   p99 {idle_p99:6.2f} ms")
        with Ticker() as busy:
            started = time.perf_counter()
            report = await store.compactor.run_once()
            seconds = time.perf_counter() - started
        busy_max, busy_p99, late = busy.summary()
        print(
            f"  compaction pass          {report.merged_stream_set} objects merged in {seconds:.2f} s "
            f"({args.megabytes / seconds:.0f} MiB/s)"
        )
        print(
            f"  loop during the pass     longest stall {busy_max:8.2f} ms   p99 {busy_p99:6.2f} ms   "
            f"{late:.2f} s of {seconds:.2f} s spent over 10 ms late"
        )
        print(f"  ratio to idle            longest stall {busy_max / max(idle_max, 1e-3):.0f}x")
        if args.again_mb:
            await write(store, streams, args.batch, args.object_mb, args.again_mb)
            store.compactor.merge_ratio = math.inf  # the first pass's object joins, however little is new
            cpu, started = time.process_time(), time.perf_counter()
            report = await store.compactor.run_once()
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            print(
                f"  pass again, {args.again_mb} MiB more   {report.merged_stream_set} objects merged in "
                f"{seconds:.2f} s, {cpu:.2f} s of CPU ({args.megabytes + args.again_mb} MiB rewritten)"
            )
    finally:
        await store.close()


async def steady(args: argparse.Namespace, root: Path) -> None:
    written = args.rounds * args.round_kb * 1024
    print(
        f"compaction steady state: {args.rounds} rounds of one {args.round_kb} KiB upload and one pass, "
        f"{args.batch} B batches over {args.streams} streams ({written / MiB:.0f} MiB in all), "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    figures: dict[str, list[Steady]] = {"size-tiered": [], "every pass": []}
    for repeat in range(2):
        arms = list(figures) if repeat % 2 == 0 else list(reversed(figures))
        for arm in arms:
            figures[arm].append(await steady_arm(args, root / f"{arm}-{repeat}", arm == "size-tiered"))
    for arm, runs in figures.items():
        for run in runs:
            print(
                f"  {arm:<12} rewrote {run.rewritten / MiB:8.1f} MiB "
                f"({run.rewritten / written:5.1f}x the payload written), {run.cpu:6.2f} s of CPU in passes, "
                f"{run.objects} objects left (at most {run.most}); catch-up read "
                f"{run.gets_per_stream:4.1f} GETs and {run.read_s * 1000:5.0f} ms per stream"
            )
    tiered, every = (min(r.rewritten for r in figures[arm]) for arm in figures)
    print(f"  ratio        every pass rewrites {every / max(tiered, 1):.1f}x what size-tiered does")
    tiered_s, every_s = (min(r.read_s for r in figures[arm]) for arm in figures)
    print(f"  ratio        a catch-up read takes {tiered_s / every_s:.2f}x as long size-tiered")


@dataclass(frozen=True)
class Steady:
    """One arm's steady state: bytes the passes rewrote, their CPU, the objects left at the end
    and the most seen, and a cold catch-up read's GETs and seconds per stream."""

    rewritten: float
    cpu: float
    objects: int
    most: int
    gets_per_stream: float
    read_s: float


async def steady_arm(args: argparse.Namespace, root: Path, tiered: bool) -> Steady:
    store = open_store(root)
    await store.start()
    if not tiered:
        store.compactor.merge_ratio = math.inf
    try:
        streams = await store.create_streams(args.streams)
        cpu, most = 0.0, 0
        for _ in range(args.rounds):
            await write_kb(store, streams, args.batch, args.round_kb)
            started = time.process_time()
            await store.compactor.run_once()
            cpu += time.process_time() - started
            most = max(most, len(await asyncio.to_thread(store.state.meta.committed_objects)))
        rewritten = store.state.metrics.registry.get_sample_value("tabletopic_s3stream_compacted_bytes_total")
        objects = len(await asyncio.to_thread(store.state.meta.committed_objects))
    finally:
        await store.close()
    gets, seconds = await catch_up(root, streams[: args.catch_up_streams], args.get_ms / 1000)
    count = max(1, min(args.catch_up_streams, len(streams)))
    return Steady(rewritten or 0.0, cpu, objects, most, gets / count, seconds / count)


async def catch_up(root: Path, streams: list[int], get_s: float) -> tuple[int, float]:
    """Ranged GETs and seconds to read ``streams`` from their start, one after another, on the
    store opened again (caches cold), each GET held ``get_s``."""
    store = open_store(root)
    await store.start()
    objects = store.state.objects
    plain = objects.get_range
    gets = 0

    async def get_range(key: str, start: int, end: int) -> bytes:
        nonlocal gets
        gets += 1
        await asyncio.sleep(get_s)
        return await plain(key, start, end)

    objects.get_range = get_range  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        for stream in streams:
            offset = store.state.stream(stream).start
            while batches := await store.fetch(stream, offset, MiB):
                offset = batches[-1].next_offset
        return gets, time.perf_counter() - started
    finally:
        await store.close()


async def write_kb(store: S3StreamStore, streams: list[int], batch: int, kilobytes: int) -> None:
    """One upload of ``kilobytes`` KiB of ``batch``-byte appends round the streams."""
    payload = os.urandom(batch)
    count = max(1, kilobytes * 1024 // batch)
    await asyncio.gather(*(store.append(streams[i % len(streams)], payload, 1) for i in range(count)))
    await store.flush()


async def write(store: S3StreamStore, streams: list[int], batch: int, object_mb: int, megabytes: int) -> None:
    """``megabytes`` of ``batch``-byte appends round the streams, flushed every ``object_mb``."""
    payload = os.urandom(batch)
    per_object = max(1, object_mb * MiB // batch)
    total = megabytes * MiB // batch
    written = 0
    while written < total:
        count = min(per_object, total - written)
        await asyncio.gather(
            *(store.append(streams[(written + i) % len(streams)], payload, 1) for i in range(count))
        )
        await store.flush()
        written += count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1024, help="bytes per append (one stored batch)")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--object-mb", type=int, default=8, help="MiB per stream-set object before the pass")
    parser.add_argument(
        "--again-mb", type=int, default=0, help="then write this many MiB more and time a second pass"
    )
    parser.add_argument("--rounds", type=int, default=0, help="measure the steady state over N rounds")
    parser.add_argument("--round-kb", type=int, default=256, help="KiB uploaded before each pass (--rounds)")
    parser.add_argument(
        "--catch-up-streams", type=int, default=100, help="streams read from their start after --rounds"
    )
    parser.add_argument("--get-ms", type=float, default=20.0, help="first-byte latency of a ranged GET")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="compaction-bench-") as root:
        asyncio.run(steady(args, Path(root)) if args.rounds else run(args, Path(root)))


if __name__ == "__main__":
    main()
