"""Benchmark of the s3stream engine against raw baselines on the same disk and object store.

For each object store (local directory, SeaweedFS) × WAL mode (local, object) × append size, prints
append MB/s and p50/p99 latency, tail-read MB/s (LogCache) and cold-read MB/s (objects through the
BlockCache), next to baselines measured in the same run: raw write+fdatasync to the WAL's disk and
raw PUT / GET to the same store, with engine/baseline ratios. On SeaweedFS it also prints what a
taken-over partition's tail read, a table task's slice read and compaction's whole-object read cost
through obstore, each beside the same request through boto3 alone.

    .venv/bin/python bench/s3stream_bench.py                 # default run, under ~2 minutes
    .venv/bin/python bench/s3stream_bench.py --seconds 10 --sizes 1024,65536,1048576 --streams 64
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from percentiles import nearest_rank

from tabletopic import database
from tabletopic.s3stream.config import StoreSettings, WalMode
from tabletopic.s3stream.objects import TAIL_GUESS
from tabletopic.s3stream.objectstore import (
    AsyncObjectStore,
    LocalObjectStoreSpec,
    ObjectStoreSpec,
    S3ObjectStore,
    S3ObjectStoreSpec,
    open_object_store,
)
from tabletopic.s3stream.store import S3StreamStore

MiB = 1024 * 1024


@dataclass
class Result:
    backend: str
    mode: str
    size: int
    append_mbps: float
    p50_ms: float
    p99_ms: float
    quiet_p50_ms: float
    quiet_p99_ms: float
    tail_mbps: float
    cold_mbps: float


async def run_case(
    backend: str, objects: ObjectStoreSpec, mode: str, size: int, seconds: float, streams: int, root: Path
) -> Result:
    directory = Path(tempfile.mkdtemp(prefix=f"bench-{mode}-", dir=root))
    if isinstance(objects, LocalObjectStoreSpec):
        objects = dataclasses.replace(objects, root=str(directory / "objects"))
    else:
        objects = dataclasses.replace(objects, prefix=f"{directory.name}/")
    engine = database.create_engine(database.default_url(directory))
    settings = StoreSettings(
        wal_mode=WalMode(mode),
        wal_dir=directory / "wal",
        log_cache_bytes=1024 * MiB,
        compaction_interval_ms=0,
        block_cache_bytes=256 * MiB,
    )
    store = S3StreamStore(settings, engine, open_object_store(objects))
    await store.start()
    ids = [await store.create_stream() for _ in range(streams)]
    payload = os.urandom(size)
    # Enough appends in flight to fill a group commit or a batch object: the broker has many
    # producers at once; one at a time would measure only latency.
    inflight = max(64, min(8192, (16 * MiB) // size))
    latencies: list[float] = []
    appended = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    max_bytes = 768 * MiB  # keeps everything in the LogCache for the tail read

    async def producer(index: int) -> None:
        nonlocal appended
        sid = ids[index % len(ids)]
        while loop.time() < deadline and appended < max_bytes:
            started = time.perf_counter()
            await store.append(sid, payload, 1)
            latencies.append(time.perf_counter() - started)
            appended += size

    started = time.perf_counter()
    await asyncio.gather(*(producer(i) for i in range(inflight)))
    append_seconds = time.perf_counter() - started

    # Unloaded latency: one append at a time per stream, what a lone producer sees.
    quiet: list[float] = []
    quiet_deadline = loop.time() + min(1.5, seconds)

    async def lone_producer(sid: int) -> None:
        while loop.time() < quiet_deadline:
            started = time.perf_counter()
            await store.append(sid, payload, 1)
            quiet.append(time.perf_counter() - started)

    await asyncio.gather(*(lone_producer(sid) for sid in ids[:4]))

    async def read_everything() -> int:
        total = 0
        for sid in ids:
            offset, end = 0, store.stream_info(sid).end_offset
            while offset < end:
                batches = await store.fetch(sid, offset, 4 * MiB)
                total += sum(len(b.payload) for b in batches)
                offset = batches[-1].next_offset
        return total

    started = time.perf_counter()
    tail_bytes = await read_everything()
    tail_seconds = time.perf_counter() - started
    await store.flush()
    store.state.log_cache.capacity = 0
    store.state.log_cache.evict()
    started = time.perf_counter()
    cold_bytes = await read_everything()
    cold_seconds = time.perf_counter() - started
    await store.close()
    engine.dispose()
    return Result(
        backend,
        mode,
        size,
        appended / append_seconds / MiB,
        nearest_rank(latencies, 0.5) * 1000,
        nearest_rank(latencies, 0.99) * 1000,
        nearest_rank(quiet, 0.5) * 1000,
        nearest_rank(quiet, 0.99) * 1000,
        tail_bytes / tail_seconds / MiB,
        cold_bytes / cold_seconds / MiB,
    )


async def takeover_tails(objects: ObjectStoreSpec, streams: int, per_object: int, root: Path) -> None:
    """What a broker pays to read the tails of partitions it has just taken over: ``streams``
    streams of one 1 KiB batch each, uploaded ``per_object`` to a stream-set object, read at once
    (one Fetch each) by a store opened on the same metadata and objects, every cache cold: one
    index read per object, one block read per stream. Baseline: the same objects' index-sized tail
    GETs through the blocking store on an 8-thread pool, as the reader made them before (boto3)."""
    directory = Path(tempfile.mkdtemp(prefix="bench-tails-", dir=root))
    if isinstance(objects, LocalObjectStoreSpec):
        objects = dataclasses.replace(objects, root=str(directory / "objects"))
    else:
        objects = dataclasses.replace(objects, prefix=f"{directory.name}/")
    engine = database.create_engine(database.default_url(directory))
    settings = StoreSettings(wal_mode=WalMode.LOCAL, wal_dir=directory / "wal", compaction_interval_ms=0)
    store = S3StreamStore(settings, engine, open_object_store(objects))
    await store.start()
    ids = [await store.create_stream() for _ in range(streams)]
    for first in range(0, streams, per_object):
        for sid in ids[first : first + per_object]:
            await store.append(sid, os.urandom(1024), 1)
        await store.flush()
    await store.close()
    store = S3StreamStore(settings, engine, open_object_store(objects))
    await store.start()
    cpu, wall = time.process_time(), time.perf_counter()
    read = await asyncio.gather(*(store.fetch(sid, 0, MiB) for sid in ids))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert all(len(batches) == 1 for batches in read)
    objects_read = -(-streams // per_object)
    blocking = open_object_store(objects)
    listed = blocking.list("")  # this case's objects alone (its own prefix or directory)
    await store.close()
    engine.dispose()

    boto3_read = (
        blocking.get_range_through_boto3 if isinstance(blocking, S3ObjectStore) else blocking.get_range
    )

    def tail(item: tuple[str, int]) -> bytes:
        key, size = item
        return boto3_read(key, max(0, size - TAIL_GUESS), size)

    with ThreadPoolExecutor(8) as pool:
        base_cpu, base_wall = time.process_time(), time.perf_counter()
        list(pool.map(tail, listed))
        base_wall, base_cpu = time.perf_counter() - base_wall, time.process_time() - base_cpu
    print(
        f"takeover tails on {objects.kind}: {streams} streams in {objects_read} objects read at once: "
        f"{wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU | baseline {len(listed)} blocking tail GETs "
        f"on 8 threads {base_wall * 1000:.0f} ms wall, {base_cpu * 1000:.0f} ms CPU | "
        f"ratio {wall / base_wall:.2f} wall, {cpu / base_cpu:.2f} CPU"
    )


def slice_reads(objects: S3ObjectStoreSpec, reads: int, size: int) -> None:
    """What the table pipeline's tasks pay to read slices: ``reads`` blocking ranged GETs of
    ``size`` bytes from one thread, while this thread counts how far it gets in pure Python (the
    interpreter lock the GETs leave it), through ``S3ObjectStore.get_range`` (obstore first) and,
    the baseline, through boto3 alone, as they read before."""
    store = open_object_store(dataclasses.replace(objects, prefix="slice-reads/"))
    assert isinstance(store, S3ObjectStore)
    store.put("slices", os.urandom(size * 16))

    def spin(done: threading.Event) -> int:
        count = 0
        while not done.is_set():
            count += 1
        return count

    figures: dict[str, tuple[float, float, int]] = {}
    for name, read in (("boto3", store.get_range_through_boto3), ("obstore", store.get_range)):
        done = threading.Event()

        def reader(read: Callable[[str, int, int], bytes] = read, done: threading.Event = done) -> None:
            for i in range(reads):
                start = (i % 16) * size
                read("slices", start, start + size)
            done.set()

        thread = threading.Thread(target=reader)
        cpu, wall = time.process_time(), time.perf_counter()
        thread.start()
        spun = spin(done)
        thread.join()
        figures[name] = (time.perf_counter() - wall, time.process_time() - cpu, spun)
    # The spinning thread's own CPU is in the process time: take it off at its rate alone.
    alone = threading.Event()
    threading.Timer(0.5, alone.set).start()
    cpu = time.process_time()
    rate = spin(alone) / (time.process_time() - cpu)
    for name, (wall, cpu, spun) in figures.items():
        reader_cpu = max(cpu - spun / rate, 0.0)
        print(
            f"slice reads through {name:7}: {reads} GETs of {size // 1024} KiB from one thread "
            f"{reads / wall:6.0f} GETs/s, {reader_cpu / reads * 1000:.2f} ms CPU per GET, "
            f"the other thread got {spun / wall / rate:.0%} of a core"
        )
    store.delete(["slices"])


async def whole_gets(objects: S3ObjectStoreSpec, reads: int) -> None:
    """What compaction pays to read the objects it merges: ``reads`` whole-object GETs, one at a
    time, through ``AsyncObjectStore.get`` (obstore first) and, the baseline, through boto3 on the
    store's I/O pool, as it read them before; process CPU per GET, the two alternated twice."""
    store = AsyncObjectStore(open_object_store(dataclasses.replace(objects, prefix="whole-gets/")), 4)
    try:
        for size in (64 * 1024, 2 * MiB):
            await store.put("whole", os.urandom(size))
            reads_by = {
                "boto3": lambda: store.run(store.store.get, "whole"),
                "obstore": lambda: store.get("whole"),
            }
            spent: dict[str, list[float]] = {"boto3": [], "obstore": []}
            for name in ("boto3", "obstore", "boto3", "obstore"):
                cpu = time.process_time()
                for _ in range(reads):
                    await reads_by[name]()
                spent[name].append((time.process_time() - cpu) / reads * 1000)
            boto3, native = spent["boto3"], spent["obstore"]
            print(
                f"whole GETs of {size // 1024} KiB, {reads} a run: boto3 {min(boto3):.2f}-{max(boto3):.2f} "
                f"ms CPU each, obstore {min(native):.2f}-{max(native):.2f} ms, "
                f"ratio {min(native) / min(boto3):.2f}"
            )
        await store.delete(["whole"])
    finally:
        store.close()


def raw_fsync_baseline(root: Path, size: int, seconds: float) -> float:
    """write+fdatasync in groups of 1 MiB (at least one write): the best a group commit can do."""
    path = root / f"raw-{size}.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    payload = os.urandom(size)
    per_group = max(1, MiB // size)
    written = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    try:
        while time.perf_counter() < deadline:
            os.writev(fd, [payload] * per_group)
            os.fdatasync(fd)
            written += size * per_group
    finally:
        os.close(fd)
        path.unlink()
    return written / (time.perf_counter() - started) / MiB


def raw_store_baseline(objects: ObjectStoreSpec, root: Path, seconds: float) -> tuple[float, float]:
    """PUT then GET of 8 MiB objects (the default batch-object size), 4 at a time."""
    if isinstance(objects, LocalObjectStoreSpec):
        objects = dataclasses.replace(objects, root=str(root / "raw-objects"))
    else:
        objects = dataclasses.replace(objects, prefix="raw-baseline/")
    store = open_object_store(objects)
    blob = os.urandom(8 * MiB)
    keys: list[str] = []
    with ThreadPoolExecutor(4) as pool:
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            batch = [f"raw/{len(keys) + i}" for i in range(4)]
            list(pool.map(lambda key: store.put(key, blob), batch))
            keys += batch
        put_mbps = len(keys) * 8 / (time.perf_counter() - started)
        started = time.perf_counter()
        list(pool.map(store.get, keys))
        get_mbps = len(keys) * 8 / (time.perf_counter() - started)
    store.delete(keys)
    return put_mbps, get_mbps


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="append phase per case")
    parser.add_argument("--sizes", default="1024,65536", help="append sizes in bytes")
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--backends", default="dir,s3", help="dir and/or s3")
    parser.add_argument("--modes", default="local,object")
    parser.add_argument(
        "--tail-streams", type=int, default=400, help="streams whose tails a takeover reads at once"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="s3stream-bench-"))
    backends: dict[str, ObjectStoreSpec] = {}
    seaweed = None
    if "dir" in args.backends:
        backends["dir"] = LocalObjectStoreSpec(root=str(root / "objects"))
    if "s3" in args.backends:
        from tests.support.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedFS

        seaweed = SeaweedFS(root / "seaweedfs").start()
        backends["s3"] = S3ObjectStoreSpec(
            bucket=seaweed.bucket,
            endpoint=seaweed.endpoint,
            region="us-east-1",
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            path_style=True,
        )
    try:
        print(f"s3stream bench: {args.seconds}s per case, {args.streams} streams, data under {root}")
        fsync = {size: raw_fsync_baseline(root, size, 1.5) for size in sizes}
        raw = {name: raw_store_baseline(objects, root, 1.5) for name, objects in backends.items()}
        for size in sizes:
            print(f"baseline raw write+fdatasync (1 MiB groups of {size} B): {fsync[size]:8.1f} MB/s")
        for name, (put, get) in raw.items():
            print(f"baseline raw PUT to {name}: {put:8.1f} MB/s   raw GET: {get:8.1f} MB/s")
        print()
        header = (
            f"{'store':5} {'wal':6} {'size':>7} {'append MB/s':>11} {'p50 ms':>7} {'p99 ms':>7} "
            f"{'1-p50':>6} {'1-p99':>6} {'tail MB/s':>9} {'cold MB/s':>9} {'append/base':>11} {'cold/GET':>8}"
        )
        print(header)
        print("-" * len(header))
        for name, objects in backends.items():
            for mode in args.modes.split(","):
                for size in sizes:
                    result = await run_case(name, objects, mode, size, args.seconds, args.streams, root)
                    base = fsync[size] if mode == "local" else raw[name][0]
                    print(
                        f"{name:5} {mode:6} {size:>7} {result.append_mbps:11.1f} {result.p50_ms:7.2f} "
                        f"{result.p99_ms:7.2f} {result.quiet_p50_ms:6.2f} {result.quiet_p99_ms:6.2f} "
                        f"{result.tail_mbps:9.1f} {result.cold_mbps:9.1f} "
                        f"{result.append_mbps / base:11.2f} {result.cold_mbps / raw[name][1]:8.2f}",
                        flush=True,
                    )
        for objects in backends.values():
            await takeover_tails(objects, args.tail_streams, 4, root)
        if isinstance(s3 := backends.get("s3"), S3ObjectStoreSpec):
            slice_reads(s3, 300, 20 * 1024)
            await whole_gets(s3, 200)
        print("\nappend/base: local WAL vs raw write+fdatasync; object WAL vs raw PUT of 8 MiB objects.")
        print("cold/GET: cold fetch through the block cache vs raw GET of 8 MiB objects.")
        print("p50/p99: latency under the throughput load (many appends in flight);")
        print("1-p50/1-p99: latency with one append in flight per stream (4 streams).")
    finally:
        if seaweed is not None:
            seaweed.stop()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    import uvloop  # what `tabletopic serve` runs on

    uvloop.run(main())
