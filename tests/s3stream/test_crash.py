"""kill -9 at chosen moments (WAL write, upload, compaction, GC) and at an arbitrary one; after a
restart every acknowledged append must be present exactly once, in order, with identical bytes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tabletopic import database
from tabletopic.crashpoints import ENV
from tests.s3stream.crash_writer import WRITER_SETTINGS, batch_size
from tests.support.store_harness import StoreHarness, local_object_settings, payload_for, s3_object_settings

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run_writer(spec: dict[str, Any], crash_at: str | None, kill_after_acks: int | None = None) -> list[str]:
    env = dict(os.environ)
    env.pop(ENV, None)
    if crash_at:
        env[ENV] = crash_at
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.s3stream.crash_writer", json.dumps(spec)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines: list[str] = []
    acks = 0
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    try:
        for raw in process.stdout:
            if not raw.endswith(b"\n"):
                break  # torn by the kill: not a complete acknowledgement
            line = raw.decode().strip()
            lines.append(line)
            acks += line.startswith("A ")
            if kill_after_acks is not None and acks >= kill_after_acks:
                process.send_signal(signal.SIGKILL)
            if time.monotonic() > deadline:
                process.kill()
    finally:
        process.wait(30)
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    assert process.returncode == -signal.SIGKILL, (
        f"writer was not killed (rc {process.returncode}):\n{stderr[-3000:]}"
    )
    return lines


async def verify(harness: StoreHarness, lines: list[str]) -> dict[int, int]:
    """Every acknowledged append present exactly once, in order, byte for byte; returns ends."""
    acked: dict[int, dict[int, tuple[int, int]]] = {}
    streams: list[int] = []
    for line in lines:
        parts = line.split()
        if parts[0] == "S":
            streams = [int(p) for p in parts[1:]]
        elif parts[0] == "A":
            sid, seq, base, count = map(int, parts[1:])
            acked.setdefault(sid, {})[base] = (seq, count)
    assert sum(len(v) for v in acked.values()) > 20, "the writer acknowledged too little to test anything"
    store = await harness.open()
    ends = {}
    for sid in streams:
        info = store.stream_info(sid)
        offset, batches = 0, []
        while offset < info.end_offset:
            chunk = await store.fetch(sid, offset, 1 << 20)
            assert chunk
            batches.extend(chunk)
            offset = chunk[-1].next_offset
        # Consecutive offsets: nothing lost, nothing duplicated.
        assert [b.base_offset for b in batches[1:]] == [b.next_offset for b in batches[:-1]]
        by_base = {b.base_offset: b for b in batches}
        for base, (seq, count) in acked.get(sid, {}).items():
            assert base in by_base, f"acknowledged offset {base} of stream {sid} is missing"
            batch = by_base[base]
            assert batch.record_count == count
            assert bytes(batch.payload) == payload_for(sid, seq, batch_size(seq)), f"offset {base} differs"
        # Unacknowledged survivors are allowed, but in order and each at most once.
        sequences = [int(bytes(b.payload[:40]).split(b":")[1]) for b in batches]
        assert sequences == sorted(set(sequences))
        ends[sid] = info.end_offset
    # Compaction and GC after recovery keep every byte, and clear orphans of the crash.
    await store.compactor.run_once()
    for sid in streams:
        assert [b.base_offset for b in await store.fetch(sid, 0, 1 << 30)][:1] == [0]
    return ends


CRASH_POINTS = [
    ("local", "wal.before_fsync:40"),
    ("local", "upload.after_put:3"),
    ("local", "upload.after_commit:3"),
    ("local", "compaction.after_put:1"),
    ("local", "compaction.after_commit:1"),
    ("local", "compaction.after_delete:1"),
    ("object", "upload.before_put:10"),
    ("object", "upload.after_put:10"),
    ("object", "upload.after_commit:10"),
    ("object", "compaction.after_commit:1"),
]


def make_harness(tmp_path: Path, wal_mode: str, objects: dict[str, Any]) -> StoreHarness:
    return StoreHarness(tmp_path, wal_mode, objects, database.default_url(tmp_path), dict(WRITER_SETTINGS))


def writer_spec(harness: StoreHarness, **extra: Any) -> dict[str, Any]:
    return {
        "root": str(harness.root),
        "wal_mode": harness.wal_mode,
        "objects": dataclasses.asdict(harness.object_settings),
        "url": harness.url,
        "streams": 3,
        "seconds": 20,
        **extra,
    }


async def _crash_once_and_verify(harness: StoreHarness, crash_at: str) -> None:
    """Runs the writer until it dies at `crash_at`, then checks every append it acknowledged."""
    try:
        lines = run_writer(writer_spec(harness), crash_at)
        await verify(harness, lines)
    finally:
        await harness.close_all()


@pytest.mark.parametrize(("wal_mode", "crash_at"), CRASH_POINTS, ids=[f"{m}-{p}" for m, p in CRASH_POINTS])
async def test_kill_at_crash_point_loses_no_acknowledged_append(
    tmp_path: Path, wal_mode: str, crash_at: str
) -> None:
    await _crash_once_and_verify(make_harness(tmp_path, wal_mode, local_object_settings(tmp_path)), crash_at)


@pytest.mark.parametrize("wal_mode", ["local", "object"])
async def test_repeated_kills_at_arbitrary_moments_lose_nothing(tmp_path: Path, wal_mode: str) -> None:
    harness = make_harness(tmp_path, wal_mode, local_object_settings(tmp_path))
    lines: list[str] = []
    try:
        for round_number, acks in enumerate((150, 400, 250)):
            stream_ids = [int(p) for p in lines[0].split()[1:]] if lines else []
            spec = writer_spec(harness, stream_ids=stream_ids, start_sequence=100_000 * round_number)
            lines += run_writer(spec, None, kill_after_acks=acks)
        await verify(harness, lines)
    finally:
        await harness.close_all()


S3_CRASH_POINTS = [
    ("local", "wal.before_fsync:40"),
    ("object", "upload.after_put:10"),
    ("local", "compaction.after_commit:1"),
]


@pytest.mark.s3
@pytest.mark.parametrize(
    ("wal_mode", "crash_at"), S3_CRASH_POINTS, ids=[f"{m}-{p}" for m, p in S3_CRASH_POINTS]
)
async def test_kill_on_s3_loses_no_acknowledged_append(
    tmp_path: Path, s3_settings: dict[str, str], wal_mode: str, crash_at: str
) -> None:
    await _crash_once_and_verify(make_harness(tmp_path, wal_mode, s3_object_settings(s3_settings)), crash_at)


PG_CRASH_POINTS = [("object", "upload.after_put:10"), ("local", "compaction.after_commit:1")]


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("wal_mode", "crash_at"), PG_CRASH_POINTS, ids=[f"{m}-{p}" for m, p in PG_CRASH_POINTS]
)
async def test_kill_with_postgres_metadata_loses_no_acknowledged_append(
    tmp_path: Path, postgres_url: str, wal_mode: str, crash_at: str
) -> None:
    harness = make_harness(tmp_path, wal_mode, local_object_settings(tmp_path))
    harness.url = postgres_url
    try:
        lines = run_writer(writer_spec(harness), crash_at)
        await verify(harness, lines)
    finally:
        await harness.close_all()
