from __future__ import annotations

import struct

import crc32c
import pytest

from tabletopic.s3stream.streams import StoredBatch
from tabletopic.table.records import (
    AbortedTransaction,
    decode_batches,
)
from tests.table.kafka_batches import CODECS, build_batch, control_batch, recompress, set_attributes, stored

RECORDS = [
    (b"k1", b"v1", [("h", b"x")]),
    (None, b"v2" * 300, []),
    (b"k3", None, [("a", None), ("b", b"")]),
    (b"", b"", []),
    (b"k5", bytes(range(256)) * 20, [("\u00e9t\u00e9", b"\x00\xff")]),
]


@pytest.mark.parametrize("codec", list(CODECS))
def test_decodes_every_field_for_every_codec(codec: str) -> None:
    batch = build_batch(RECORDS, codec)
    out = decode_batches(stored([batch], first_offset=100), 0, 1000, partition=3)
    assert out.errors == []
    assert out.partition == 3
    assert out.offsets == [100, 101, 102, 103, 104]
    assert out.timestamps == [1_700_000_000_000 + i for i in range(5)]
    assert out.keys == [r[0] for r in RECORDS]
    assert out.values == [r[1] for r in RECORDS]
    assert out.headers == [tuple(r[2]) for r in RECORDS]


def test_snappy_in_xerial_framing_is_decoded() -> None:
    import cramjam

    plain = build_batch(RECORDS, "none")
    raw_records = plain[61:]
    block = bytes(cramjam.snappy.compress_raw(raw_records[:100]))
    block2 = bytes(cramjam.snappy.compress_raw(raw_records[100:]))
    framed = (
        b"\x82SNAPPY\x00"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">i", len(block))
        + block
        + struct.pack(">i", len(block2))
        + block2
    )
    out = decode_batches(stored([recompress(plain, 2, framed)]), 0, 10)
    assert out.errors == []
    assert out.values == [r[1] for r in RECORDS]


def test_baseoffset_in_payload_is_ignored_in_favour_of_stored_base_offset() -> None:
    batch = bytearray(build_batch(RECORDS[:2]))
    struct.pack_into(">q", batch, 0, 999_999)  # outside the CRC
    out = decode_batches([StoredBatch(7, 2, bytes(batch))], 0, 100)
    assert out.offsets == [7, 8]


def test_only_offsets_in_the_requested_range_are_returned() -> None:
    batches = stored([build_batch(RECORDS), build_batch(RECORDS), build_batch(RECORDS)], first_offset=10)
    out = decode_batches(batches, 13, 22)
    assert out.offsets == list(range(13, 22))
    assert out.values[0] == RECORDS[3][1]


def test_log_append_time_batches_use_max_timestamp_for_every_record() -> None:
    batch = set_attributes(build_batch(RECORDS), 0x08)
    out = decode_batches(stored([batch]), 0, 10)
    assert set(out.timestamps) == {1_700_000_000_004}


def test_control_batches_are_skipped_and_committed_transactions_are_kept() -> None:
    data = build_batch(RECORDS[:2], transactional=True, producer_id=5)
    out = decode_batches(stored([data, control_batch(5, commit=True)]), 0, 10)
    assert out.offsets == [0, 1]
    assert out.skipped_control == 1


def test_aborted_transaction_with_marker_in_range_is_dropped() -> None:
    aborted = build_batch(RECORDS[:2], transactional=True, producer_id=5)
    other = build_batch(RECORDS[:1], transactional=True, producer_id=6)
    plain = build_batch(RECORDS[:1])
    batches = stored([aborted, other, plain, control_batch(5, commit=False), control_batch(6, commit=True)])
    out = decode_batches(batches, 0, 100)
    assert out.offsets == [2, 3]
    assert out.skipped_aborted == 2


def test_aborted_transaction_whose_marker_lies_beyond_the_range_uses_the_aborted_list() -> None:
    batches = stored([build_batch(RECORDS[:2], transactional=True, producer_id=9), build_batch(RECORDS[:1])])
    assert decode_batches(batches, 0, 3, aborted_transactions=[AbortedTransaction(9, 0)]).offsets == [2]
    assert decode_batches(batches, 0, 3).offsets == [0, 1, 2]


def test_corrupted_crc_yields_a_batch_error_and_other_batches_still_decode() -> None:
    good = build_batch(RECORDS)
    bad = bytearray(build_batch(RECORDS))
    bad[-3] ^= 0xFF
    out = decode_batches(stored([good, bytes(bad), good]), 0, 100)
    assert out.offsets == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    assert len(out.errors) == 1
    assert out.errors[0].base_offset == 5 and out.errors[0].record_count == 5
    assert "CRC32C mismatch" in out.errors[0].reason


@pytest.mark.parametrize("cut", [0, 10, 60, 61, 80])
def test_truncated_batch_yields_a_clear_error(cut: int) -> None:
    batch = build_batch(RECORDS)
    out = decode_batches([StoredBatch(0, 5, batch[:cut])], 0, 100)
    assert out.offsets == []
    assert "truncated" in out.errors[0].reason or "length" in out.errors[0].reason


def test_records_garbage_with_valid_crc_is_reported_not_raised() -> None:
    batch = bytearray(build_batch(RECORDS))
    batch[61] = 0x7E  # first record's length: 63 (zig-zag), wrong
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    out = decode_batches(stored([bytes(batch)]), 0, 100)
    assert out.offsets == [] and len(out.errors) == 1


def test_bad_compressed_data_is_reported() -> None:
    batch = bytearray(build_batch(RECORDS, "lz4"))
    batch[70:80] = b"\x00" * 10
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    out = decode_batches(stored([bytes(batch)]), 0, 100)
    assert "cannot decompress (lz4)" in out.errors[0].reason


def test_wrong_magic_is_reported() -> None:
    batch = bytearray(build_batch(RECORDS))
    batch[16] = 1
    out = decode_batches(stored([bytes(batch)]), 0, 100)
    assert "magic 1" in out.errors[0].reason


def test_large_varints_and_negative_timestamp_deltas_decode() -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    builder.append(0, 2_000_000_000_000, b"k" * 70_000, b"v" * 300_000, [])
    builder.append(1, 1_000_000_000_000, None, None, [])
    out = decode_batches(stored([bytes(builder.build())]), 0, 10)
    assert out.timestamps == [2_000_000_000_000, 1_000_000_000_000]
    assert len(out.keys[0]) == 70_000 and out.values[1] is None


def test_memoryview_payloads_are_accepted() -> None:
    batch = build_batch(RECORDS, "zstd")
    out = decode_batches([StoredBatch(0, 5, memoryview(batch))], 0, 10)
    assert out.values == [r[1] for r in RECORDS]


def test_a_batch_spanning_more_offsets_than_stored_is_an_error() -> None:
    batch = build_batch(RECORDS)
    out = decode_batches([StoredBatch(0, 3, batch)], 0, 100)
    assert out.offsets == [] and "spans 5 offsets" in out.errors[0].reason


def test_offset_delta_beyond_last_offset_delta_is_an_error() -> None:
    batch = bytearray(build_batch(RECORDS[:2]))
    struct.pack_into(">i", batch, 23, 0)  # lastOffsetDelta 0 although the 2nd record has delta 1
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    out = decode_batches([StoredBatch(0, 2, bytes(batch))], 0, 100)
    assert out.offsets == [] and "offset delta 1" in out.errors[0].reason


def test_an_earlier_aborted_transaction_does_not_abort_the_producers_next_one() -> None:
    # Producer 9 aborted a transaction at offsets 0..1 (marker at 2, before the decoded range) and
    # then wrote a new transaction at 3..4 whose commit marker lies beyond the range.
    batches = stored(
        [
            build_batch(RECORDS[:2], transactional=True, producer_id=9),
            control_batch(9, commit=False),
            build_batch(RECORDS[:2], transactional=True, producer_id=9),
        ]
    )
    with_end = [AbortedTransaction(9, 0, last_offset=2)]
    assert decode_batches(batches[2:], 3, 5, aborted_transactions=with_end).offsets == [3, 4]
    assert decode_batches(batches, 0, 5, aborted_transactions=[AbortedTransaction(9, 0)]).offsets == [3, 4]
