"""The local WAL on its own: group commit, framing, replay of a cut file, reuse of segment files."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import threading
from pathlib import Path

import crc32c
import pytest

from tabletopic.config import StartupError
from tabletopic.s3stream import wal as wal_module
from tabletopic.s3stream.direct_io import BLOCK
from tabletopic.s3stream.objects import IN_PLACE_AVERAGE_BYTES
from tabletopic.s3stream.streams import StorageUnavailable
from tabletopic.s3stream.wal import Group, LocalWal, WalCorruption, segment_files
from tabletopic.s3stream.wal_format import FRAME, SEGMENT_SUFFIX, SPARE_SUFFIX, scan_segment
from tests.support.waiting import wait_until

SEGMENT = 1 << 20


def written_segment(directory: Path) -> tuple[bytes, int]:
    """The one segment holding frames: its bytes up to the end frame, and its index."""
    for path in sorted(directory.glob(f"*{SEGMENT_SUFFIX}")):
        index = int(path.name.split(".")[0])
        data = path.read_bytes()
        scan = scan_segment(data, index)
        if scan.records:
            assert scan.sealed
            return data[: scan.end + FRAME.size], index
    raise AssertionError("no segment holds records")


async def write_groups(
    directory: Path, groups: list[list[bytes]], segment_bytes: int = SEGMENT
) -> tuple[LocalWal, list[Group]]:
    committed: list[Group] = []
    wal = LocalWal(directory, segment_bytes, committed.append)
    list(wal.replay())
    await wal.start()
    offset = 0
    for payloads in groups:
        group = None
        for payload in payloads:
            group = wal.append(1, offset, 1, payload)
            offset += 1
        assert group is not None
        await group.future
    await wal.close()
    return wal, committed


def files(directory: Path, suffix: str) -> list[Path]:
    return sorted(directory.glob(f"*{suffix}"))


def replayed(directory: Path, segment_bytes: int = SEGMENT) -> list[bytes]:
    return [bytes(r.payload) for r in LocalWal(directory, segment_bytes, lambda group: None).replay()]


async def test_concurrent_appends_share_one_fsync(tmp_path: Path) -> None:
    committed: list[Group] = []
    wal = LocalWal(tmp_path, SEGMENT, committed.append)
    list(wal.replay())
    await wal.start()
    groups = [wal.append(1, i, 1, b"x" * 100) for i in range(500)]
    await asyncio.gather(*(g.future for g in groups))
    await wal.close()
    assert len(committed) <= 2
    assert sum(g.appends for g in committed) == 500


async def test_a_file_cut_anywhere_replays_exactly_the_whole_groups_before_the_cut(tmp_path: Path) -> None:
    groups = [[bytes([g]) * (10 + i) for i in range(g % 4 + 1)] for g in range(12)]
    await write_groups(tmp_path, groups)
    data, index = written_segment(tmp_path)
    whole = scan_segment(data, index).records
    assert len(whole) == sum(len(g) for g in groups)
    boundaries = set()
    for cut in range(BLOCK, len(data) + 1):
        scan = scan_segment(data[:cut], index)
        assert scan.end <= cut and scan.sealed == (cut == len(data))
        expected = whole[: len(scan.records)]
        assert [bytes(r.payload) for r in scan.records] == [bytes(r.payload) for r in expected]
        boundaries.add(scan.end)
    # Replay never stops inside a group: the valid lengths are exactly the group boundaries.
    assert len(boundaries) == len(groups) + 1


async def test_frames_replay_only_at_their_own_place(tmp_path: Path) -> None:
    # A reused file holds old frames past its written end; a frame copied to another offset or
    # read as part of another segment must not replay.
    await write_groups(tmp_path, [[b"first"], [b"second"]])
    data, index = written_segment(tmp_path)
    first_end = scan_segment(data, index).end
    moved = data[:BLOCK] + data[BLOCK + 1 :]
    assert scan_segment(moved, index).records == []
    assert scan_segment(data, index + 1).records == []
    assert len(scan_segment(data[:first_end], index).records) == 2


async def test_replay_after_restart_continues_in_a_new_segment(tmp_path: Path) -> None:
    await write_groups(tmp_path, [[b"a", b"b"], [b"c"]])
    committed: list[Group] = []
    wal = LocalWal(tmp_path, SEGMENT, committed.append)
    assert [bytes(r.payload) for r in wal.replay()] == [b"a", b"b", b"c"]
    await wal.start()
    await wal.append(1, 3, 1, b"d").future
    await wal.close()
    assert replayed(tmp_path) == [b"a", b"b", b"c", b"d"]


async def test_large_payloads_written_in_place_replay_byte_for_byte(tmp_path: Path) -> None:
    # Payloads above the in-place size are checksummed where they lie instead of joined, and a group
    # larger than the writer's buffer is written in pieces: the frame must be the same bytes.
    big = [bytes([i]) * (IN_PLACE_AVERAGE_BYTES * 3 + i) for i in range(3)]
    huge = bytes(range(256)) * (5 << 12)  # 5 MiB, above the 4 MiB write buffer
    groups = [[b"small"], big, [big[0], b"mixed"], [huge]]
    await write_groups(tmp_path, groups, segment_bytes=16 << 20)
    assert replayed(tmp_path, 16 << 20) == [p for g in groups for p in g]


async def test_segments_roll_before_overflowing_and_released_ones_are_reused(tmp_path: Path) -> None:
    committed: list[Group] = []
    wal = LocalWal(tmp_path, SEGMENT, committed.append)
    list(wal.replay())
    await wal.start()
    payload = b"p" * 200_000
    for offset in range(12):  # 2.4 MB: three segments of 1 MiB at least
        await wal.append(1, offset, 1, payload).future
    assert wal.current_segment >= 3
    # The segment after the current one is opened ahead on the executor: created, then preallocated.
    await wait_until(lambda: wal._next is not None)
    assert all(p.stat().st_size == SEGMENT for p in segment_files(tmp_path))
    await wal.release(wal.current_segment)
    spares = files(tmp_path, SPARE_SUFFIX)
    assert spares and len(segment_files(tmp_path)) == 2  # the current one and the next, opened ahead
    for offset in range(12, 24):
        await wal.append(1, offset, 1, payload).future
    assert len(files(tmp_path, SPARE_SUFFIX)) < len(spares)  # taken back as segments
    await wal.close()
    # The reused files still hold the old frames past their new ones: replay must not see them.
    offsets = [r.base_offset for r in LocalWal(tmp_path, SEGMENT, lambda group: None).replay()]
    assert offsets == list(range(offsets[0], 24)) and offsets[0] <= 12


async def test_damage_before_the_last_segment_with_frames_refuses_to_start(tmp_path: Path) -> None:
    wal = LocalWal(tmp_path, SEGMENT, lambda group: None)
    list(wal.replay())
    await wal.start()
    await wal.append(1, 0, 1, b"first segment").future
    await wal.roll().done
    await wal.append(1, 1, 1, b"second segment").future
    await wal.close()
    data, index = written_segment(tmp_path)  # the first one holding records
    path = tmp_path / f"{index:020d}{SEGMENT_SUFFIX}"
    damaged = bytearray(path.read_bytes())
    damaged[len(data) - FRAME.size - 3] ^= 0xFF  # inside its only group's payload
    path.write_bytes(bytes(damaged))
    with pytest.raises(WalCorruption, match="refusing to start"):
        replayed(tmp_path)


async def test_segments_opened_ahead_and_never_used_replay_as_empty(tmp_path: Path) -> None:
    await write_groups(tmp_path, [[b"a"], [b"b"]])
    _, index = written_segment(tmp_path)
    (tmp_path / f"{index + 5:020d}{SEGMENT_SUFFIX}").write_bytes(b"")  # a crash before its header
    assert replayed(tmp_path) == [b"a", b"b"]


async def test_segments_of_the_previous_format_are_replayed_then_deleted(tmp_path: Path) -> None:
    import struct

    import crc32c

    body = struct.pack(">qqII", 7, 0, 1, 3) + b"old"
    (tmp_path / f"{1:020d}.wal").write_bytes(struct.pack(">II", len(body), crc32c.crc32c(body)) + body)
    wal = LocalWal(tmp_path, SEGMENT, lambda group: None)
    assert [(r.stream_id, bytes(r.payload)) for r in wal.replay()] == [(7, b"old")]
    await wal.start()
    await wal.release(wal.current_segment)
    await wal.close()
    assert not files(tmp_path, ".wal")
    assert not (tmp_path / f"{1:020d}{SPARE_SUFFIX}").exists()  # never reused: its old frames lack seeds


async def test_appends_before_start_are_refused(tmp_path: Path) -> None:
    wal = LocalWal(tmp_path, SEGMENT, lambda group: None)
    list(wal.replay())
    with pytest.raises(StorageUnavailable):
        wal.append(1, 0, 1, b"x")


async def test_a_segment_prepared_late_never_replaces_the_current_one(tmp_path: Path) -> None:
    # The next segment is prepared on the WAL's executor; when rolls come faster, the writer
    # prepares it itself, and the executor's late preparation of the same index must not rename
    # a spare over the segment being written (its acknowledged frames would be lost).
    wal = LocalWal(tmp_path, SEGMENT, lambda group: None)
    list(wal.replay())
    await wal.start()
    gate = threading.Event()
    wal._executor.submit(gate.wait)  # preparations queue up behind this
    offset = 0
    for _ in range(3):
        await wal.roll().done
        await wal.append(1, offset, 1, b"r%d" % offset).future
        offset += 1
    gate.set()
    await wal.append(1, offset, 1, b"last").future
    await wal.close()
    assert replayed(tmp_path) == [b"r0", b"r1", b"r2", b"last"]


async def test_frames_of_payloads_with_known_crcs_are_the_same_bytes(tmp_path: Path) -> None:
    # The WAL combines a payload's CRC given by the appender instead of reading the payload again:
    # the segment written must be byte for byte the one written without it.
    payloads = [bytes([i]) * (IN_PLACE_AVERAGE_BYTES * 3 + i) for i in range(3)] + [b"small"]
    segments = []
    for known in (False, True):
        directory = tmp_path / str(known)
        wal = LocalWal(directory, SEGMENT, lambda group: None)
        list(wal.replay())
        await wal.start()
        group = None
        for offset, payload in enumerate(payloads):
            group = wal.append(1, offset, 1, payload, crc32c.crc32c(payload) if known else None)
        assert group is not None
        await group.future
        await wal.close()
        segments.append(written_segment(directory))
    assert segments[0] == segments[1]
    assert replayed(tmp_path / "True") == payloads


async def test_a_segment_not_prepared_in_a_directory_taken_over_and_removed_is_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A broker paused past its lease finds its shared WAL's directory removed by the broker that
    # recovered it: preparing the next segment fails, and the fence, not a warning, says why.
    directory = tmp_path / "wal"
    wal = LocalWal(directory, SEGMENT, lambda group: None)
    list(wal.replay())
    await wal.start()
    await wait_until(lambda: wal._next is not None)
    shutil.rmtree(directory)
    with caplog.at_level(logging.INFO, logger="tabletopic.s3stream.wal"):
        await wal.roll().done  # takes the segment prepared ahead; the one after it cannot be made
        await wait_until(lambda: "is gone (taken over?)" in caplog.text)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    await wal.close()


async def test_a_full_disk_makes_no_segment_and_the_roll_that_needs_one_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Preallocation refused for want of space once went unnoticed (as on a filesystem without
    # fallocate): the segment grew as written, and a write failed halfway through a frame once it
    # passed the blocks the disk still had. Now no segment is made, the roll that needs it fails
    # naming the cause (what /health then reports), and what was acknowledged before replays.
    wal = LocalWal(tmp_path, SEGMENT, lambda group: None)
    list(wal.replay())
    await wal.start()
    await wal.append(1, 0, 1, b"before").future
    await wait_until(lambda: wal._next is not None)  # made ahead from the spare of the first start

    def disk_full(_fd: int, _offset: int, _length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", disk_full)
    await wal.roll().done  # takes the segment made ahead; the one after it cannot be made
    with pytest.raises(StorageUnavailable, match="No space left on device"):
        await wal.roll().done
    assert "No space left on device" in str(wal.failure)
    made = [p.name for p in segment_files(tmp_path)]
    assert f"{wal.current_segment + 1:020d}{SEGMENT_SUFFIX}" not in made, made  # removed, not left empty
    await wal.close()
    assert replayed(tmp_path) == [b"before"]


async def test_a_disk_without_room_for_the_first_segments_is_one_line_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was a 150-line traceback ending in "OSError: [Errno 28] No space left on device".
    def disk_full(_fd: int, _size: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(wal_module, "write_zeros", disk_full)
    wal = LocalWal(tmp_path, SEGMENT, lambda group: None)
    with pytest.raises(StartupError) as refused:
        await wal.start("s3stream.wal.path")
    assert refused.value.key == "s3stream.wal.path"
    assert str(refused.value) == (
        f"cannot make the WAL's first segments in {tmp_path}: No space left on device; they take 3 MiB "
        "(s3stream.wal.segment.bytes each): free space there or change s3stream.wal.path"
    )
    wal._executor.shutdown()
