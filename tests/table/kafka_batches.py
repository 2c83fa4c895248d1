"""Record batches built by a real client library (kafka-python's DefaultRecordBatchBuilder)."""

from __future__ import annotations

import struct

import cramjam
import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from tabletopic.s3stream.streams import StoredBatch

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build_batch(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: str = "none",
    base_timestamp: int = 1_700_000_000_000,
    transactional: bool = False,
    producer_id: int = -1,
) -> bytes:
    """One producer-side batch (baseOffset 0) holding ``records`` (key, value, headers).

    kafka-python compresses gzip and zstd itself; its snappy/lz4 libraries are not installed, so those
    two are compressed here with cramjam (bare snappy block as librdkafka sends, LZ4 frame).
    """
    own_codec = codec in ("snappy", "lz4")
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0 if own_codec else CODECS[codec],
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 30,
    )
    for i, (key, value, headers) in enumerate(records):
        assert builder.append(i, base_timestamp + i, key, value, headers) is not None
    batch = bytes(builder.build())
    if codec == "snappy":
        return recompress(batch, 2, bytes(cramjam.snappy.compress_raw(batch[61:])))
    if codec == "lz4":
        return recompress(batch, 3, bytes(cramjam.lz4.compress(batch[61:])))
    return batch


def recompress(batch: bytes, codec: int, records_block: bytes) -> bytes:
    """Replace an uncompressed batch's records with ``records_block`` compressed by ``codec``."""
    header = bytearray(batch[:61])
    struct.pack_into(">i", header, 8, 61 + len(records_block) - 12)
    (attrs,) = struct.unpack_from(">h", header, 21)
    struct.pack_into(">h", header, 21, (attrs & ~7) | codec)
    out = bytearray(bytes(header) + records_block)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def set_attributes(batch: bytes, extra: int) -> bytes:
    """OR ``extra`` into the batch attributes and fix the CRC (for control / log-append-time)."""
    buf = bytearray(batch)
    (attrs,) = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, attrs | extra)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def control_batch(producer_id: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    batch = build_batch([(key, value, [])], transactional=True, producer_id=producer_id)
    return set_attributes(batch, 0x20)


def stored(batches: list[bytes], first_offset: int = 0) -> list[StoredBatch]:
    out = []
    offset = first_offset
    for payload in batches:
        (count,) = struct.unpack_from(">i", payload, 57)
        out.append(StoredBatch(offset, count, payload))
        offset += count
    return out
