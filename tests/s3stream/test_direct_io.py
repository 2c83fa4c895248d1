"""Writing around the page cache: whole-block writes give back exactly the bytes written, a
writer resumes inside a partial block, and filesystems that refuse O_DIRECT still work."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from tabletopic.s3stream import direct_io
from tabletopic.s3stream.direct_io import BLOCK, AlignedBuffer, BlockWriter, open_direct, write_zeros
from tabletopic.s3stream.objectstore import LocalObjectStore
from tabletopic.s3stream.wal import LocalWal


def test_odd_sized_writes_and_flushes_give_back_exactly_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = open_direct(path, os.O_RDWR | os.O_CREAT)
    buffer = AlignedBuffer(2 * BLOCK)  # small, so writes wrap the buffer often
    expected = bytearray()
    try:
        out = BlockWriter(fd, 0, buffer)
        for size in (1, 4095, 4096, 4097, 9000, 3, 12_345):
            piece = os.urandom(size)
            out.write(piece)
            expected += piece
            out.flush()  # the partial last block is rewritten by the next write
        assert out.position == len(expected)
        # A new writer resumes in the middle of a block: the block's leading bytes come from disk.
        out = BlockWriter(fd, len(expected), buffer)
        out.write(b"tail")
        out.flush()
        expected += b"tail"
    finally:
        buffer.close()
        os.close(fd)
    data = path.read_bytes()
    assert data[: len(expected)] == bytes(expected)
    assert len(data) % BLOCK == 0 and not data[len(expected) :].strip(b"\0")  # padding is zeros


def test_write_zeros_fills_the_file(tmp_path: Path) -> None:
    path = tmp_path / "z"
    path.write_bytes(b"x" * 5 * BLOCK)
    fd = open_direct(path, os.O_RDWR)
    try:
        write_zeros(fd, 3 * BLOCK + 1)
    finally:
        os.close(fd)
    assert path.read_bytes() == bytes(4 * BLOCK) + b"x" * BLOCK  # whole blocks, the rest untouched


async def test_a_filesystem_refusing_o_direct_gets_the_same_writes_buffered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def refusing(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if flags & direct_io.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    wal = LocalWal(tmp_path / "wal", 1 << 20, lambda group: None)
    list(wal.replay())
    await wal.start()
    for offset in range(5):
        await wal.append(1, offset, 1, b"p%d" % offset).future
    await wal.close()
    replayed = [bytes(r.payload) for r in LocalWal(tmp_path / "wal", 1 << 20, lambda group: None).replay()]
    assert replayed == [b"p%d" % i for i in range(5)]
    store = LocalObjectStore(tmp_path / "objects")
    store.put("a/b", [b"x" * 5000, b"y"])
    assert store.get("a/b") == b"x" * 5000 + b"y"
