"""The object format: layout, index, footer and the pure slice decoder Spark tasks use."""

from __future__ import annotations

import itertools

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic.s3stream.objects import (
    FOOTER,
    IN_PLACE_AVERAGE_BYTES,
    CorruptObject,
    StoredBlock,
    build_object,
    parse_footer,
    parse_index,
    read_slice,
)
from tabletopic.s3stream.streams import StoredBatch


def batches(stream_id: int, count: int, size: int) -> list[StoredBatch]:
    return [StoredBatch(i * 2, 2, bytes([stream_id]) * size) for i in range(count)]


def built(runs, block_bytes: int = 1000) -> bytes:
    return b"".join(build_object(runs, block_bytes).parts)


def test_object_is_self_describing_blocks_index_and_footer() -> None:
    obj = build_object([(7, batches(7, 10, 300)), (9, batches(9, 3, 50))], block_bytes=1000)
    data = b"".join(obj.parts)
    assert len(data) == obj.size
    position, length, crc = parse_footer(data[-FOOTER.size :], len(data))
    blocks = parse_index(data[position : position + length], crc)
    assert blocks == obj.blocks
    assert {b.stream_id for b in blocks} == {7, 9}
    # Blocks of a stream are contiguous and cover its whole range.
    seven = [b for b in blocks if b.stream_id == 7]
    assert seven[0].start_offset == 0 and seven[-1].end_offset == 20
    assert all(
        a.end_offset == b.start_offset and a.position + a.size == b.position
        for a, b in itertools.pairwise(seven)
    )
    assert len(seven) > 1


def test_read_slice_decodes_a_stream_range_and_trims_to_offsets() -> None:
    obj = build_object([(1, batches(1, 5, 10)), (2, batches(2, 6, 20))], block_bytes=64)
    data = b"".join(obj.parts)
    rng = next(r for r in obj.ranges if r.stream_id == 2)
    piece = data[rng.position : rng.position + rng.size]
    everything = read_slice(piece)
    assert [b.base_offset for b in everything] == [0, 2, 4, 6, 8, 10]
    assert all(bytes(b.payload) == b"\x02" * 20 for b in everything)
    assert [b.base_offset for b in read_slice(piece, 3, 7)] == [2, 4, 6]


@pytest.mark.parametrize("cut", [1, 10, 17, 40])
def test_read_slice_rejects_bytes_that_end_inside_a_batch(cut: int) -> None:
    data = built([(1, batches(1, 3, 30))])
    with pytest.raises(CorruptObject):
        read_slice(data[: 3 * 46 - cut])


def test_truncated_or_foreign_object_fails_the_footer_check() -> None:
    data = built([(1, batches(1, 3, 30))])
    with pytest.raises(CorruptObject, match="truncated"):
        parse_footer(data[:-5], len(data) - 5)
    with pytest.raises(CorruptObject, match="footer"):
        parse_footer(b"x" * 100, 100)


def test_damaged_index_fails_its_checksum() -> None:
    data = bytearray(built([(1, batches(1, 3, 30))]))
    position, length, crc = parse_footer(bytes(data[-FOOTER.size :]), len(data))
    data[position] ^= 1
    with pytest.raises(CorruptObject, match="CRC"):
        parse_index(bytes(data[position : position + length]), crc)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**40),
            st.lists(st.tuples(st.integers(1, 5), st.binary(max_size=300)), max_size=12),
        ),
        max_size=5,
        unique_by=lambda run: run[0],
    ),
    st.integers(16, 2048),
)
def test_every_run_reads_back_identically_whatever_the_block_size(
    runs: list[tuple[int, list[tuple[int, bytes]]]], block_bytes: int
) -> None:
    laid_out = []
    for stream_id, items in runs:
        offset, stream_batches = 0, []
        for count, payload in items:
            stream_batches.append(StoredBatch(offset, count, payload))
            offset += count
        laid_out.append((stream_id, stream_batches))
    obj = build_object(laid_out, block_bytes)
    data = b"".join(obj.parts)
    position, length, crc = parse_footer(data[-FOOTER.size :], len(data))
    assert parse_index(data[position : position + length], crc) == obj.blocks
    by_stream = {r.stream_id: r for r in obj.ranges}
    for stream_id, stream_batches in laid_out:
        if not stream_batches:
            assert stream_id not in by_stream
            continue
        rng = by_stream[stream_id]
        decoded = read_slice(data[rng.position : rng.position + rng.size])
        assert [(b.base_offset, b.record_count, bytes(b.payload)) for b in decoded] == [
            (b.base_offset, b.record_count, b.payload) for b in stream_batches
        ]


@pytest.mark.parametrize("size", [100, IN_PLACE_AVERAGE_BYTES * 2 + 7])
def test_block_checksums_cover_exactly_the_block_bytes_small_or_large_batches(size: int) -> None:
    # Large batches are checksummed in place and become parts themselves, small ones are joined:
    # either way every block's CRC is that of its bytes in the object.
    obj = build_object([(1, batches(1, 6, size)), (2, batches(2, 2, 50))], block_bytes=3 * size)
    data = b"".join(obj.parts)
    assert len(data) == obj.size
    for block in obj.blocks:
        assert crc32c.crc32c(data[block.position : block.position + block.size]) == block.crc
    rng = next(r for r in obj.ranges if r.stream_id == 1)
    decoded = read_slice(data[rng.position : rng.position + rng.size])
    assert [bytes(b.payload) for b in decoded] == [b"\x01" * size] * 6


@pytest.mark.parametrize("size", [100, IN_PLACE_AVERAGE_BYTES * 2 + 7])
def test_an_object_of_batches_with_known_crcs_is_the_same_bytes(size: int) -> None:
    # The appender's CRCs replace reading the large batches again; the object must not change.
    def runs(known: bool) -> list[tuple[int, list[StoredBatch]]]:
        def crc(payload: bytes | memoryview) -> int | None:
            return crc32c.crc32c(payload) if known else None

        return [
            (
                s,
                [
                    StoredBatch(b.base_offset, b.record_count, b.payload, crc(b.payload))
                    for b in batches(s, 5, size + s)
                ],
            )
            for s in (1, 2)
        ]

    plain, combined = build_object(runs(False), 3 * size), build_object(runs(True), 3 * size)
    assert b"".join(combined.parts) == b"".join(plain.parts)
    assert combined.blocks == plain.blocks
    if size > IN_PLACE_AVERAGE_BYTES:  # large batches are not read again: the given CRC is used
        wrong = [
            (s, [StoredBatch(b.base_offset, b.record_count, b.payload, 0) for b in run])
            for s, run in runs(False)
        ]
        assert build_object(wrong, 3 * size).blocks != plain.blocks


def test_older_blocks_are_carried_whole_and_joined_up_to_the_block_size() -> None:
    """A merge hands build_object the blocks of older objects: each goes in whole with the CRC it
    was verified against, joined with its neighbours while the block stays within block_bytes."""
    old = build_object([(3, batches(3, 12, 100))], block_bytes=300)
    data = b"".join(old.parts)
    carried = [
        StoredBlock(b.start_offset, b.end_offset, data[b.position : b.position + b.size], b.crc)
        for b in old.blocks
    ]
    assert len(carried) == 4 and all(b.next_offset - b.base_offset == 6 for b in carried)
    # Two old blocks (348 bytes each) fit a block of 1,000, a third would not.
    new = build_object([(3, carried[:3]), (4, batches(4, 2, 10))], block_bytes=1000)
    merged = b"".join(new.parts)
    three = [b for b in new.blocks if b.stream_id == 3]
    assert [(b.start_offset, b.end_offset) for b in three] == [(0, 12), (12, 18)]
    assert all(b.size <= 1000 for b in three)
    assert three[1].crc == carried[2].crc  # alone in its block: its CRC as verified
    for block in new.blocks:
        assert crc32c.crc32c(merged[block.position : block.position + block.size]) == block.crc
    rng = next(r for r in new.ranges if r.stream_id == 3)
    assert (rng.start_offset, rng.end_offset) == (0, 18)
    got = read_slice(merged[rng.position : rng.position + rng.size])
    assert [(b.base_offset, bytes(b.payload)) for b in got] == [
        (b.base_offset, bytes(b.payload)) for b in batches(3, 9, 100)
    ]
