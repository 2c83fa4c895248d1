"""The records block codecs: round trips, both snappy framings, and damaged input."""

from __future__ import annotations

import struct

import cramjam
import pytest

from tabletopic.records import compression
from tabletopic.records.compression import XERIAL_MAGIC, Compression, compress, decompress
from tabletopic.records.errors import BatchFault, RecordBatchError

DATA = [b"", b"x", bytes(range(256)) * 40, b"abc" * 50_000]


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("data", DATA, ids=len)
def test_every_codec_round_trips(codec: Compression, data: bytes) -> None:
    block = compress(codec, data)
    assert decompress(codec, block) == data
    assert decompress(codec, memoryview(block)) == data
    assert type(decompress(codec, block)) is bytes


@pytest.mark.parametrize("data", DATA, ids=len)
def test_xerial_framed_snappy_round_trips_in_32_kib_blocks(data: bytes) -> None:
    block = compress(Compression.SNAPPY, data, xerial=True)
    assert block.startswith(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    assert decompress(Compression.SNAPPY, block) == data


def test_xerial_framing_written_by_hand_is_read_block_by_block() -> None:
    data = bytes(range(256)) * 10
    first = bytes(cramjam.snappy.compress_raw(data[:100]))
    second = bytes(cramjam.snappy.compress_raw(data[100:]))
    framed = (
        XERIAL_MAGIC
        + struct.pack(">ii", 1, 1)
        + struct.pack(">i", len(first))
        + first
        + struct.pack(">i", len(second))
        + second
    )
    assert decompress(Compression.SNAPPY, framed) == data
    for cut in range(16, len(framed)):
        if cut in (16, 20 + len(first)):
            continue  # a whole number of blocks: a shorter but valid stream
        with pytest.raises(RecordBatchError) as info:
            decompress(Compression.SNAPPY, framed[:cut])
        assert info.value.fault is BatchFault.CORRUPT
    with pytest.raises(RecordBatchError, match="truncated xerial snappy block length"):
        decompress(Compression.SNAPPY, framed + b"\x00")


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_garbage_and_truncations_cannot_be_decompressed(codec: Compression) -> None:
    block = compress(codec, bytes(range(256)) * 40)
    name = codec.name.lower()
    with pytest.raises(RecordBatchError, match=rf"cannot decompress \({name}\)"):
        decompress(codec, b"\x00\x01garbage" * 3)
    for cut in range(0, len(block), 7):
        try:
            out = decompress(codec, block[:cut])
        except RecordBatchError:
            continue
        assert len(out) < 256 * 40  # a codec may return what it could read, never more


def test_unknown_codecs_are_refused() -> None:
    with pytest.raises(RecordBatchError, match="unknown compression codec 5"):
        decompress(5, b"data")
    with pytest.raises(ValueError, match="unknown compression codec 7"):
        compress(7, b"data")  # type: ignore[arg-type]


def test_output_beyond_the_size_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_SIZE", 1000)
    with pytest.raises(RecordBatchError, match="decompressed batch of 2000 bytes exceeds 1000"):
        decompress(Compression.ZSTD, compress(Compression.ZSTD, b"z" * 2000))
    framed = compress(Compression.SNAPPY, b"s" * 40_000, xerial=True)
    with pytest.raises(RecordBatchError, match="decompressed batch exceeds 1000 bytes"):
        decompress(Compression.SNAPPY, framed)
