"""Damaged state on restart: a torn or corrupted WAL tail, a damaged older segment, a truncated
object. Recovery keeps every valid record and says clearly what it dropped, or refuses to start."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from tabletopic.s3stream.direct_io import BLOCK
from tabletopic.s3stream.objects import CorruptObject, fetch_slice
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.s3stream.wal import WalCorruption, segment_files
from tabletopic.s3stream.wal_format import FRAME, RECORD, frame_header, header, scan_segment
from tests.support.store_harness import StoreHarness, payload_for


def wal_segments(harness: StoreHarness) -> list[Path]:
    return sorted(segment_files(harness.root / "wal"))


def newest_with_records(harness: StoreHarness) -> tuple[Path, int, int]:
    """The newest segment holding records: path, index and where its frames end."""
    for path in reversed(wal_segments(harness)):
        index = int(path.name.split(".")[0])
        scan = scan_segment(path.read_bytes(), index)
        if scan.records:
            return path, index, scan.end
    raise AssertionError("no WAL segment holds records")


def damage_newest_segment(
    harness: StoreHarness, damage: Callable[[bytearray, int], None]
) -> tuple[Path, int]:
    """Edits the newest segment holding records in place: ``damage`` gets its bytes and where its
    frames end. Returns the segment's path and index."""
    segment, index, end = newest_with_records(harness)
    data = bytearray(segment.read_bytes())
    damage(data, end)
    segment.write_bytes(bytes(data))
    return segment, index


async def reopen_logging_wal_warnings(
    harness: StoreHarness, caplog: pytest.LogCaptureFixture
) -> S3StreamStore:
    caplog.set_level(logging.WARNING, logger="tabletopic.s3stream.wal")
    return await harness.open()


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


async def test_a_half_written_group_after_the_last_one_is_discarded_with_a_log_line(
    local_harness: StoreHarness, caplog: pytest.LogCaptureFixture
) -> None:
    sid = await crash_with_data_only_in_wal(local_harness, 10)

    def torn_frame(data: bytearray, end: int) -> None:
        garbage = b"\x00\x00\x02\x00garbage that a half-written frame leaves"
        data[end : end + len(garbage)] = garbage

    damage_newest_segment(local_harness, torn_frame)
    store = await reopen_logging_wal_warnings(local_harness, caplog)
    assert store.stream_info(sid).end_offset == 10
    assert [bytes(b.payload) for b in await store.fetch(sid, 0, 1 << 20)] == [
        payload_for(sid, i, 500) for i in range(10)
    ]
    assert any("was not closed" in r.getMessage() for r in caplog.records)


async def test_corrupted_bytes_in_the_newest_segment_stop_recovery_at_the_last_valid_record(
    local_harness: StoreHarness, caplog: pytest.LogCaptureFixture
) -> None:
    sid = await crash_with_data_only_in_wal(local_harness, 10)

    def flip_a_byte_of_the_8th_record(data: bytearray, end: int) -> None:
        frame = (end - BLOCK) // 10  # ten groups of one record each, all the same size
        data[BLOCK + frame * 7 + 30] ^= 0xFF

    damage_newest_segment(local_harness, flip_a_byte_of_the_8th_record)
    store = await reopen_logging_wal_warnings(local_harness, caplog)
    assert store.stream_info(sid).end_offset == 7
    assert any("discarding" in r.getMessage() for r in caplog.records)


async def test_damage_in_an_older_segment_refuses_to_start(local_harness: StoreHarness) -> None:
    sid = await crash_with_data_only_in_wal(local_harness, 4)

    def damage_and_close(data: bytearray, end: int) -> None:
        data[end - 3] ^= 0xFF
        data[end : end + FRAME.size] = bytes(FRAME.size)  # and as if it had been closed: no end frame

    segment, index = damage_newest_segment(local_harness, damage_and_close)
    # A newer segment holding a frame makes the damaged one an older segment: its tail held
    # acknowledged data, not a write cut by the crash.
    newer = index + 5
    body = RECORD.pack(sid, 1_000, 1, 1) + b"x"
    frame = frame_header(newer, BLOCK, len(body), [body]) + body
    segment.with_name(f"{newer:020d}.seg").write_bytes(header(newer) + frame)
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
