"""Damaged state on restart: a torn or corrupted WAL tail, a damaged older segment, a truncated
object. Recovery keeps every valid record and says clearly what it dropped, or refuses to start."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tabletopic.s3stream.objects import CorruptObject, fetch_slice
from tabletopic.s3stream.wal import SUFFIX, WalCorruption
from tests.support.store_harness import StoreHarness, payload_for


def wal_segments(harness: StoreHarness) -> list[Path]:
    return sorted((harness.root / "wal").glob(f"*{SUFFIX}"))


async def crash_with_data_only_in_wal(harness: StoreHarness, count: int) -> int:
    """Append with uploads effectively off, then abandon the store as a kill would (no close)."""
    store = await harness.open(upload_interval_ms=3_600_000, upload_bytes=1 << 30)
    sid = await store.create_stream()
    for i in range(count):
        await store.append(sid, payload_for(sid, i, 500), 1)
    # Simulate kill -9: stop the store's background work (uploader, WAL writer) without flushing
    # anything, and never close it.
    assert store.state.wal is not None
    for task in asyncio.all_tasks():
        if task.get_name().startswith("s3stream-"):
            task.cancel()
    harness.stores.remove(store)
    return sid


async def test_torn_wal_tail_is_truncated_with_a_log_line_and_valid_records_survive(
    local_harness: StoreHarness, caplog: pytest.LogCaptureFixture
) -> None:
    sid = await crash_with_data_only_in_wal(local_harness, 10)
    segment = [s for s in wal_segments(local_harness) if s.stat().st_size][-1]
    segment.write_bytes(segment.read_bytes() + b"\x00\x00\x02\x00garbage that a half-written frame leaves")
    caplog.set_level(logging.WARNING, logger="tabletopic.s3stream.wal")
    store = await local_harness.open()
    assert store.stream_info(sid).end_offset == 10
    assert [bytes(b.payload) for b in await store.fetch(sid, 0, 1 << 20)] == [
        payload_for(sid, i, 500) for i in range(10)
    ]
    assert any("torn tail" in r.getMessage() for r in caplog.records)


async def test_corrupted_bytes_in_the_newest_segment_stop_recovery_at_the_last_valid_record(
    local_harness: StoreHarness, caplog: pytest.LogCaptureFixture
) -> None:
    sid = await crash_with_data_only_in_wal(local_harness, 10)
    segment = [s for s in wal_segments(local_harness) if s.stat().st_size][-1]
    data = bytearray(segment.read_bytes())
    frame = len(data) // 10
    data[frame * 7 + 30] ^= 0xFF  # flip a payload byte of the 8th record
    segment.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, logger="tabletopic.s3stream.wal")
    store = await local_harness.open()
    assert store.stream_info(sid).end_offset == 7
    assert any("discarding" in r.getMessage() for r in caplog.records)


async def test_damage_in_an_older_segment_refuses_to_start(local_harness: StoreHarness) -> None:
    sid = await crash_with_data_only_in_wal(local_harness, 4)
    segments = [s for s in wal_segments(local_harness) if s.stat().st_size]
    data = bytearray(segments[-1].read_bytes())
    data[-3] ^= 0xFF
    segments[-1].write_bytes(bytes(data))
    # A newer (empty) segment makes the damaged one an older segment holding acknowledged data.
    newer = segments[-1].with_name(f"{int(segments[-1].name[: -len(SUFFIX)]) + 5:020d}{SUFFIX}")
    newer.write_bytes(b"")
    with pytest.raises(WalCorruption, match="refusing to start"):
        await local_harness.open()
    assert sid


async def test_truncated_object_is_reported_not_misread(harness: StoreHarness) -> None:
    store = await harness.open()
    sid = await store.create_stream()
    for i in range(20):
        await store.append(sid, payload_for(sid, i, 2000), 1)
    await store.flush()
    piece = (await store.locate(sid, 0, 20))[0]
    objects = harness.object_store()
    whole = objects.get(piece.object_key)
    objects.put(piece.object_key, whole[: len(whole) // 2])
    with pytest.raises(CorruptObject):
        fetch_slice(objects, piece)
    store = await harness.reopen(store, log_cache_bytes=1 << 20)
    with pytest.raises(CorruptObject):
        await store.fetch(sid, 0, 1 << 20)


async def test_switching_to_the_object_wal_uploads_what_the_local_wal_still_holds(
    local_harness: StoreHarness,
) -> None:
    sid = await crash_with_data_only_in_wal(local_harness, 6)
    local_harness.wal_mode = "object"
    store = await local_harness.open()
    assert store.stream_info(sid).end_offset == 6
    assert not any(p.stat().st_size for p in wal_segments(local_harness))
    store = await local_harness.reopen(store)
    assert [bytes(b.payload) for b in await store.fetch(sid, 0, 1 << 20)] == [
        payload_for(sid, i, 500) for i in range(6)
    ]
