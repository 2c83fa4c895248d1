"""A writer process for the kill -9 tests: appends to a few streams as fast as it can and prints one
line per acknowledged append (``A stream_id sequence base_offset record_count``), flushed at once,
until a crash point (``TABLETOPIC_CRASH_AT``) or the parent kills it.

Usage: ``python -m tests.s3stream.crash_writer '<json spec>'`` with keys root, wal_mode, objects,
url, streams, seconds.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tabletopic.s3stream.objectstore import parse_object_store_spec
from tests.support.store_harness import StoreHarness, payload_for

# Compaction and uploads run constantly so that every crash point is reached within a second.
WRITER_SETTINGS = {
    "upload_bytes": 48 * 1024,
    "upload_interval_ms": 50,
    "object_batch_ms": 5,
    "object_batch_bytes": 48 * 1024,
    "split_bytes": 40 * 1024,
    "compaction_interval_ms": 100,
    "delete_grace_ms": 500,
    "small_object_bytes": 256 * 1024,
}


def batch_size(sequence: int) -> int:
    return 50 + (sequence * 7919) % 6000


def record_count(sequence: int) -> int:
    return 1 + sequence % 3


async def write(spec: dict) -> None:
    harness = StoreHarness(
        Path(spec["root"]),
        spec["wal_mode"],
        parse_object_store_spec(spec["objects"]),
        spec["url"],
        WRITER_SETTINGS,
    )
    store = await harness.open()
    streams = spec.get("stream_ids") or []
    while len(streams) < spec["streams"]:
        streams.append(await store.create_stream())
    print("S " + " ".join(map(str, streams)), flush=True)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + spec["seconds"]
    start_sequence = spec.get("start_sequence", 0)

    async def one_stream(stream_id: int) -> None:
        sequence = start_sequence
        window: list[tuple[int, asyncio.Future[int]]] = []
        while loop.time() < deadline:
            # Keep a few appends in flight per stream so that group commit and batching kick in.
            while len(window) < 8:
                payload = payload_for(stream_id, sequence, batch_size(sequence))
                window.append(
                    (
                        sequence,
                        asyncio.ensure_future(store.append(stream_id, payload, record_count(sequence))),
                    )
                )
                sequence += 1
            seq, future = window.pop(0)
            base = await future
            sys.stdout.write(f"A {stream_id} {seq} {base} {record_count(seq)}\n")
            sys.stdout.flush()

    await asyncio.gather(*(one_stream(sid) for sid in streams))
    await store.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    asyncio.run(write(json.loads(sys.argv[1])))
