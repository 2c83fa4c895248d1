"""The local WAL on its own: group commit, framing and replay of a cut file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tabletopic.s3stream.objects import IN_PLACE_AVERAGE_BYTES
from tabletopic.s3stream.streams import StorageUnavailable
from tabletopic.s3stream.wal import SUFFIX, Group, LocalWal, scan_frames


def only_segment(directory: Path) -> bytes:
    [segment] = [p for p in directory.glob(f"*{SUFFIX}") if p.stat().st_size]
    return segment.read_bytes()


async def write_groups(directory: Path, groups: list[list[bytes]]) -> tuple[LocalWal, list[float]]:
    fsyncs: list[float] = []
    committed: list[Group] = []
    wal = LocalWal(directory, 1 << 30, committed.append, fsyncs.append)
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
    return wal, fsyncs


async def test_concurrent_appends_share_one_fsync(tmp_path: Path) -> None:
    committed: list[Group] = []
    fsyncs: list[float] = []
    wal = LocalWal(tmp_path, 1 << 30, committed.append, fsyncs.append)
    list(wal.replay())
    await wal.start()
    groups = [wal.append(1, i, 1, b"x" * 100) for i in range(500)]
    await asyncio.gather(*(g.future for g in groups))
    await wal.close()
    assert len(fsyncs) <= 2
    assert sum(g.appends for g in committed) == 500


async def test_a_file_cut_anywhere_replays_exactly_the_whole_groups_before_the_cut(tmp_path: Path) -> None:
    groups = [[bytes([g]) * (10 + i) for i in range(g % 4 + 1)] for g in range(12)]
    await write_groups(tmp_path, groups)
    data = only_segment(tmp_path)
    whole, valid = scan_frames(data)
    assert valid == len(data) and len(whole) == sum(len(g) for g in groups)
    boundaries = {0}
    for cut in range(len(data) + 1):
        records, valid = scan_frames(data[:cut])
        assert valid <= cut
        assert [bytes(r.payload) for r in records] == [bytes(r.payload) for r in whole[: len(records)]]
        boundaries.add(valid)
    # Replay never stops inside a group: the valid lengths are exactly the group boundaries.
    assert len(boundaries) == len(groups) + 1


async def test_replay_after_restart_continues_in_a_new_segment(tmp_path: Path) -> None:
    await write_groups(tmp_path, [[b"a", b"b"], [b"c"]])
    committed: list[Group] = []
    wal = LocalWal(tmp_path, 1 << 30, committed.append)
    replayed = [bytes(r.payload) for r in wal.replay()]
    assert replayed == [b"a", b"b", b"c"]
    await wal.start()
    await wal.append(1, 3, 1, b"d").future
    await wal.close()
    wal = LocalWal(tmp_path, 1 << 30, committed.append)
    assert [bytes(r.payload) for r in wal.replay()] == [b"a", b"b", b"c", b"d"]


async def test_large_payloads_written_in_place_replay_byte_for_byte(tmp_path: Path) -> None:
    # Payloads above the in-place size are checksummed where they lie instead of joined: the frame
    # must be the same bytes, and a cut inside it must still drop the whole group.
    big = [bytes([i]) * (IN_PLACE_AVERAGE_BYTES * 3 + i) for i in range(3)]
    groups = [[b"small"], big, [big[0], b"mixed"]]
    await write_groups(tmp_path, groups)
    data = only_segment(tmp_path)
    records, valid = scan_frames(data)
    assert valid == len(data)
    assert [bytes(r.payload) for r in records] == [p for g in groups for p in g]
    records, _ = scan_frames(data[: len(data) - 1])
    assert [bytes(r.payload) for r in records] == [p for g in groups[:2] for p in g]


async def test_appends_before_start_are_refused(tmp_path: Path) -> None:
    wal = LocalWal(tmp_path, 1 << 30, lambda group: None)
    list(wal.replay())
    with pytest.raises(StorageUnavailable):
        wal.append(1, 0, 1, b"x")
