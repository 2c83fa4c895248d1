"""The codecs of a batch's records block (attributes bits 0-2), compressing and decompressing.

A compressed batch keeps its 61-byte header in the clear and compresses the records as one block.
Snappy comes in two shapes: Kafka's Java client wraps it in xerial's framing (a magic, then
length-prefixed snappy blocks) while librdkafka and others send one bare snappy block; readers
accept both. LZ4 is the LZ4 frame format.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from tabletopic.records.errors import RecordBatchError


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Decompressed batches larger than this are refused: a corrupt or hostile batch must not exhaust
# the memory of a Spark worker (Kafka's own message.max.bytes is far below this).
MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # magic, version 1, compatible version 1
_XERIAL_BLOCK_SIZE = 32 * 1024  # what the Java client's SnappyOutputStream uses
_BE_INT32 = struct.Struct(">i")
_CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def compress(codec: Compression, data: bytes | bytearray | memoryview, xerial: bool = False) -> bytes:
    """Compress a records block with ``codec``; ``xerial`` frames snappy as the Java client does."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        return _xerial_snappy(bytes(data)) if xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress a batch's records block (always a ``bytes``, which the record loop indexes
    fastest).

    Raises:
        RecordBatchError: an unknown codec, data the codec cannot read, or more than
            :data:`MAX_DECOMPRESSED_SIZE` bytes of output.
    """
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            out = bytes(cramjam.gzip.decompress(data))
        elif codec == Compression.SNAPPY:
            out = _snappy(bytes(data))
        elif codec == Compression.LZ4:
            out = bytes(cramjam.lz4.decompress(data))
        elif codec == Compression.ZSTD:
            out = bytes(cramjam.zstd.decompress(data))
        else:
            raise RecordBatchError(f"unknown compression codec {codec}")
    except RecordBatchError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and ValueErrors
        raise RecordBatchError(f"cannot decompress ({_CODEC_NAMES.get(codec, codec)}): {exc}") from exc
    if len(out) > MAX_DECOMPRESSED_SIZE:
        raise RecordBatchError(f"decompressed batch of {len(out)} bytes exceeds {MAX_DECOMPRESSED_SIZE}")
    return out


def _snappy(data: bytes) -> bytes:
    """Snappy in either shape: xerial-framed when it starts with the xerial magic, else one block."""
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos = len(_XERIAL_HEADER)
    parts: list[bytes] = []
    total = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise RecordBatchError("truncated xerial snappy block length")
        (size,) = _BE_INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise RecordBatchError("truncated xerial snappy block")
        part = bytes(cramjam.snappy.decompress_raw(data[pos : pos + size]))
        total += len(part)
        if total > MAX_DECOMPRESSED_SIZE:
            raise RecordBatchError(f"decompressed batch exceeds {MAX_DECOMPRESSED_SIZE} bytes")
        parts.append(part)
        pos += size
    return b"".join(parts)


def _xerial_snappy(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_SIZE]))
        out += _BE_INT32.pack(len(block))
        out += block
    return bytes(out)
