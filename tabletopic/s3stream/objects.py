"""The self-describing object format shared by stream-set objects (many streams) and stream objects
(one stream), and the pure functions that read it.

Layout::

    data blocks | index | footer

- A *batch* is ``>qII`` (base offset, record count, payload length) followed by the payload.
- A *block* is a run of consecutive batches of one stream, about ``block_bytes`` long; all blocks of
  one stream in one object are contiguous, so a stream's share of an object is one byte range.
- The *index* has one 40-byte entry per block: ``>qqqQII`` stream id, start offset, end offset
  (exclusive), position, size, CRC32C of the block.
- The *footer* (24 bytes) is ``>QII8s``: index position, index length, CRC32C of the index, magic.

An object can therefore be read without the metadata DB: fetch the footer, then the index, then any
block by range. A truncated or damaged object fails the footer/CRC checks with :class:`CorruptObject`
instead of returning wrong data.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import crc32c

from tabletopic.checksum import extend
from tabletopic.s3stream.streams import ObjectSlice, StoredBatch, StreamError

MAGIC = b"TTS3OBJ1"
BATCH_HEADER = struct.Struct(">qII")
INDEX_ENTRY = struct.Struct(">qqqQII")
FOOTER = struct.Struct(">QII8s")
# How much of an object's tail to fetch when its index size is not known yet: one request for
# the footer and (nearly always) the whole index.
TAIL_GUESS = 64 * 1024
# Pieces (a batch header and a payload each, in objects and in the WAL) averaging at least this many
# bytes are checksummed and written where they lie; smaller ones are joined first, since one copy
# costs less than a CRC call per small piece.
IN_PLACE_AVERAGE_BYTES = 8 * 1024


class CorruptObject(StreamError):
    """An object (or a slice of it) is truncated or fails its checksum."""


@dataclass(frozen=True, slots=True)
class BlockEntry:
    stream_id: int
    start_offset: int
    end_offset: int
    position: int
    size: int
    crc: int


@dataclass(frozen=True, slots=True)
class StreamRange:
    """The contiguous share of one stream in one object (what the metadata DB records)."""

    stream_id: int
    start_offset: int
    end_offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class StoredBlock:
    """A verified block of an existing object, stored batches with their headers, carried into a
    new object as it is: a merge of small objects copies each block it keeps instead of splitting it
    into batches and writing every header again (compaction's per-batch Python cost, which for a
    cluster of many quiet partitions is nearly all of it). ``crc`` is the CRC32C of ``data``."""

    base_offset: int
    next_offset: int
    data: bytes | memoryview
    crc: int


# What an object's run of one stream holds, in offset order: appended batches, or blocks of an
# older object.
StoredPiece = StoredBatch | StoredBlock


def stored_bytes(piece: StoredPiece) -> int:
    """The bytes ``piece`` takes in an object, batch headers included."""
    if isinstance(piece, StoredBlock):
        return len(piece.data)
    return BATCH_HEADER.size + len(piece.payload)


@dataclass
class BuiltObject:
    parts: list[bytes | memoryview]
    size: int
    blocks: list[BlockEntry]
    ranges: list[StreamRange]


def build_object(runs: Sequence[tuple[int, Sequence[StoredPiece]]], block_bytes: int) -> BuiltObject:
    """Lay out ``(stream_id, batches or older blocks in offset order)`` runs as one object.

    A block of small batches is joined into one buffer and checksummed with one CRC32C call: one
    memory copy per byte is far cheaper than two checksum calls per (often 1 KiB) batch, and the
    result is a short list of large parts for ``writev`` or an S3 body. A block of large batches
    (``IN_PLACE_AVERAGE_BYTES`` per header-and-payload piece on average) is checksummed piece by
    piece and its batches become parts themselves, uncopied. An older block joins the block being
    filled whole, with the CRC it was verified against; the block is closed first when the older
    one would take it past ``block_bytes``, so no block grows beyond what one batch past
    ``block_bytes`` makes.
    """
    parts: list[bytes | memoryview] = []
    blocks: list[BlockEntry] = []
    ranges: list[StreamRange] = []
    pack = BATCH_HEADER.pack
    header_size = BATCH_HEADER.size
    position = 0

    def close_block(
        stream_id: int, first: int, end: int, pieces: list[bytes | memoryview], crcs: list[int | None]
    ) -> None:
        nonlocal position
        size = sum(len(piece) for piece in pieces)
        if size >= IN_PLACE_AVERAGE_BYTES * len(pieces):
            # Large batches: checksum them where they lie (or combine the CRC the appender gave)
            # and pass them on uncopied (a copy into fresh memory costs more per byte than a CRC
            # call per batch).
            crc = 0
            for piece, known in zip(pieces, crcs, strict=True):
                crc = extend(crc, piece, known)
            parts.extend(pieces)
        else:
            data = b"".join(pieces)
            crc = crc32c.crc32c(data)
            parts.append(data)
        blocks.append(BlockEntry(stream_id, first, end, position, size, crc))
        position += size

    for stream_id, batches in runs:
        if not batches:
            continue
        range_start = position
        pieces: list[bytes | memoryview] = []
        crcs: list[int | None] = []
        pending = 0
        block_first = batches[0].base_offset
        for batch in batches:
            if isinstance(batch, StoredBlock):
                if pending and pending + len(batch.data) > block_bytes:
                    close_block(stream_id, block_first, batch.base_offset, pieces, crcs)
                    pieces, crcs, pending, block_first = [], [], 0, batch.base_offset
                pieces.append(batch.data)
                crcs.append(batch.crc)
                pending += len(batch.data)
            else:
                pieces.append(pack(batch.base_offset, batch.record_count, len(batch.payload)))
                pieces.append(batch.payload)
                crcs.append(None)
                crcs.append(batch.crc)
                pending += header_size + len(batch.payload)
            if pending >= block_bytes:
                close_block(stream_id, block_first, batch.next_offset, pieces, crcs)
                pieces, crcs, pending, block_first = [], [], 0, batch.next_offset
        if pieces:
            close_block(stream_id, block_first, batches[-1].next_offset, pieces, crcs)
        ranges.append(
            StreamRange(
                stream_id,
                batches[0].base_offset,
                batches[-1].next_offset,
                range_start,
                position - range_start,
            )
        )
    index = b"".join(
        INDEX_ENTRY.pack(b.stream_id, b.start_offset, b.end_offset, b.position, b.size, b.crc) for b in blocks
    )
    parts.append(index)
    parts.append(FOOTER.pack(position, len(index), crc32c.crc32c(index), MAGIC))
    return BuiltObject(parts, position + len(index) + FOOTER.size, blocks, ranges)


def parse_footer(tail: bytes | memoryview, object_size: int) -> tuple[int, int, int]:
    """``(index position, index length, index crc)`` from the last bytes of an object."""
    if len(tail) < FOOTER.size:
        raise CorruptObject(f"object of {object_size} bytes is too short for a footer")
    position, length, crc, magic = FOOTER.unpack_from(tail, len(tail) - FOOTER.size)
    if magic != MAGIC:
        raise CorruptObject(
            f"object has no valid footer (magic {magic!r}); it is truncated or not an s3stream object"
        )
    if position + length + FOOTER.size != object_size:
        raise CorruptObject(
            f"object footer says index at {position}+{length} but the object has {object_size} bytes "
            "(truncated?)"
        )
    return position, length, crc


def parse_index(index: bytes | memoryview, crc: int) -> list[BlockEntry]:
    if crc32c.crc32c(index) != crc:
        raise CorruptObject("object index fails its CRC32C check")
    if len(index) % INDEX_ENTRY.size:
        raise CorruptObject("object index length is not a whole number of entries")
    return [BlockEntry(*fields) for fields in INDEX_ENTRY.iter_unpack(index)]


async def read_index(
    get_range: Callable[[str, int, int], Awaitable[bytes]], key: str, object_size: int
) -> list[BlockEntry]:
    """Read an object's block index with one range request (two when the index is large).

    ``get_range`` is the store's asynchronous ranged GET (``AsyncObjectStore.get_range``), not a
    blocking call on a thread: on S3 it goes through obstore first, about a fifth of boto3's Python
    CPU per request, and a broker that gains hundreds of partitions reads hundreds of indexes at
    once."""
    start = max(0, object_size - TAIL_GUESS)
    tail = await get_range(key, start, object_size)
    if len(tail) != object_size - start:
        raise CorruptObject(f"object {key} is shorter than its recorded size {object_size}")
    position, length, crc = parse_footer(tail, object_size)
    if position >= start:
        index = memoryview(tail)[position - start : position - start + length]
    else:
        index = memoryview(await get_range(key, position, position + length))
    return parse_index(index, crc)


def split_batches(data: bytes | memoryview) -> list[StoredBatch]:
    """Every batch in a run of whole batches; payloads are zero-copy views into ``data``."""
    view = memoryview(data)
    batches: list[StoredBatch] = []
    position = 0
    end = len(view)
    header_size = BATCH_HEADER.size
    unpack = BATCH_HEADER.unpack_from
    while position < end:
        if end - position < header_size:
            raise CorruptObject(f"slice ends inside a batch header at byte {position}")
        base, count, length = unpack(view, position)
        position += header_size
        if position + length > end:
            raise CorruptObject(f"slice ends inside a batch payload at byte {position} (needs {length})")
        batches.append(StoredBatch(base, count, view[position : position + length]))
        position += length
    return batches


def read_slice(
    data: bytes | memoryview, start_offset: int | None = None, end_offset: int | None = None
) -> list[StoredBatch]:
    """Decode the bytes of an :class:`ObjectSlice` (``object[position:position+size]``) into the
    batches overlapping ``[start_offset, end_offset)``. Pure: no I/O, usable on a Spark executor.

    Raises:
        CorruptObject: the bytes do not end on a batch boundary (truncated object or wrong range).
    """
    batches = split_batches(data)
    if start_offset is None and end_offset is None:
        return batches
    low = start_offset if start_offset is not None else -1
    high = end_offset if end_offset is not None else 1 << 62
    return [b for b in batches if b.next_offset > low and b.base_offset < high]


def fetch_slice(store: Any, piece: ObjectSlice) -> list[StoredBatch]:
    """One range GET plus :func:`read_slice`: the batches of ``piece`` within its offsets."""
    data = store.get_range(piece.object_key, piece.position, piece.position + piece.size)
    if len(data) != piece.size:
        raise CorruptObject(
            f"object {piece.object_key} returned {len(data)} of {piece.size} bytes (truncated)"
        )
    return read_slice(data, piece.start_offset, piece.end_offset)


def verify_block(data: bytes | memoryview, entry: BlockEntry, key: str) -> None:
    if len(data) != entry.size or crc32c.crc32c(data) != entry.crc:
        raise CorruptObject(
            f"block at {entry.position} of object {key} (stream {entry.stream_id}) fails its CRC32C check"
        )
