"""The bytes of a local WAL segment, and reading them back.

A segment file (``<index>.seg``) is preallocated and reused, so past its written end it holds
zeros or the frames of an earlier life. Every frame is therefore tied to its place: its CRC is
seeded with the segment's index, the frame's file offset and its length, and a frame read anywhere
else, or from an earlier use of the file, fails it.

- Block 0 (``BLOCK`` bytes): the header, ``>8sQI`` (magic, segment index, CRC32C of the two).
- From ``BLOCK`` on, frames back to back: ``>II`` (body length, seeded CRC32C of the body), then
  the body, records ``>qqII`` (stream id, base offset, record count, payload length) + payload.
  One frame is one group commit: acknowledged as a whole after its fsync, or not at all.
- A segment that was closed ends with the end frame (length ``END``, seeded CRC of no bytes), so
  replay can tell a segment that ended from one whose acknowledged tail was lost.

Segments of the previous format (``<index>.wal``: frames from byte 0, unseeded CRC, written by
appending) are still replayed, then deleted.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass

import crc32c

from tabletopic.checksum import extend
from tabletopic.s3stream.direct_io import BLOCK

MAGIC = b"TTWALSG1"
HEADER = struct.Struct(">8sQI")
FRAME = struct.Struct(">II")
RECORD = struct.Struct(">qqII")
SEED = struct.Struct(">QQI")
END = 0xFFFFFFFF
SEGMENT_SUFFIX = ".seg"
SPARE_SUFFIX = ".spare"
LEGACY_SUFFIX = ".wal"


@dataclass(frozen=True, slots=True)
class WalRecord:
    stream_id: int
    base_offset: int
    record_count: int
    payload: bytes | memoryview


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """What a segment holds: its records, where its valid frames end, whether it was closed."""

    records: list[WalRecord]
    end: int
    sealed: bool


def segment_name(index: int, suffix: str = SEGMENT_SUFFIX) -> str:
    """The file name of segment ``index`` (or of its spare, or of a previous-format segment)."""
    return f"{index:020d}{suffix}"


def header(index: int) -> bytes:
    """The header block of segment ``index``, padded to a whole block."""
    crc = crc32c.crc32c(MAGIC + index.to_bytes(8, "big"))
    return HEADER.pack(MAGIC, index, crc).ljust(BLOCK, b"\0")


def seed(index: int, position: int, length: int) -> int:
    return crc32c.crc32c(SEED.pack(index, position, length))


def frame_header(
    index: int,
    position: int,
    length: int,
    body: list[bytes | memoryview],
    crcs: list[int | None] | None = None,
) -> bytes:
    """``>II`` of a frame at ``position`` whose body is the parts ``body``, checksummed in place
    except where ``crcs`` gives a part's CRC32C (combined instead, see :mod:`tabletopic.checksum`)."""
    crc = seed(index, position, length)
    for part, known in zip(body, crcs or [None] * len(body), strict=True):
        crc = extend(crc, part, known)
    return FRAME.pack(length, crc)


def end_frame(index: int, position: int) -> bytes:
    return FRAME.pack(END, seed(index, position, END))


def scan_segment(data: bytes | mmap.mmap, index: int) -> SegmentScan:
    """Parse a segment's frames until the end frame, the end of ``data`` or the first bad frame.
    A header that is missing or names another index means the segment never got its first frame
    (a crash between preparing the file and writing its header): it is empty."""
    view = memoryview(data)
    if bytes(view[: HEADER.size]) != header(index)[: HEADER.size]:
        return SegmentScan([], BLOCK, False)
    records, end = _read_frames(view, BLOCK, lambda position, length: seed(index, position, length))
    sealed = False
    if len(data) - end >= FRAME.size:
        length, crc = FRAME.unpack_from(view, end)
        sealed = length == END and crc == seed(index, end, END)
    return SegmentScan(records, end, sealed)


def scan_legacy(data: bytes) -> tuple[list[WalRecord], int]:
    """Frames of a previous-format segment: ``(records, valid byte length)``."""
    return _read_frames(memoryview(data), 0, lambda position, length: 0)


def _read_frames(
    view: memoryview, position: int, seed_of: Callable[[int, int], int]
) -> tuple[list[WalRecord], int]:
    """Frames from ``position`` on while they are whole and pass their CRC (``seed_of(position,
    length)`` being its starting value): their records and where the valid frames end."""
    records: list[WalRecord] = []
    while len(view) - position >= FRAME.size:
        length, crc = FRAME.unpack_from(view, position)
        body_start = position + FRAME.size
        if body_start + length > len(view):
            break
        body = view[body_start : body_start + length]
        if crc32c.crc32c(body, seed_of(position, length)) != crc:
            break
        parsed = parse_records(body)
        if parsed is None:
            break
        records.extend(parsed)
        position = body_start + length
    return records, position


def parse_records(body: memoryview) -> list[WalRecord] | None:
    """The records of a frame body, or None if they do not fill it exactly."""
    records = []
    position = 0
    while position < len(body):
        if len(body) - position < RECORD.size:
            return None
        stream_id, base, count, length = RECORD.unpack_from(body, position)
        position += RECORD.size
        if position + length > len(body):
            return None
        records.append(WalRecord(stream_id, base, count, body[position : position + length]))
        position += length
    return records
