"""The table pipeline's decoder: stored batches -> columns for an offset range."""

from __future__ import annotations

import struct

import pytest

from tabletopic.records.compression import Compression
from tabletopic.records.crc import write_crc
from tabletopic.records.decoder import decode_records
from tabletopic.records.encoder import Record, build_batch, build_control_batch
from tabletopic.records.transactions import AbortedTransaction, ControlType
from tests.records.samples import RECORDS, T0, Stored, batch, stored


def control_batch(producer_id: int, commit: bool) -> bytes:
    return build_control_batch(ControlType.COMMIT if commit else ControlType.ABORT, producer_id, timestamp=T0)


@pytest.mark.parametrize("codec", list(Compression))
def test_decodes_every_field_for_every_codec(codec: Compression) -> None:
    out = decode_records(stored([batch(RECORDS, codec)], first_offset=100), 0, 1000, partition=3)
    assert out.errors == []
    assert out.partition == 3
    assert out.offsets == [100, 101, 102, 103, 104]
    assert out.timestamps == [1_700_000_000_000 + i for i in range(5)]
    assert out.keys == [r[0] for r in RECORDS]
    assert out.values == [r[1] for r in RECORDS]
    assert out.headers == [tuple(r[2]) for r in RECORDS]


def test_snappy_in_xerial_framing_is_decoded() -> None:
    records = [*RECORDS, Record(b"big", bytes(range(256)) * 200)]  # more than one 32 KiB xerial block
    out = decode_records(stored([batch(records, Compression.SNAPPY, xerial_snappy=True)]), 0, 10)
    assert out.errors == []
    assert out.values == [r[1] for r in records]


def test_baseoffset_in_payload_is_ignored_in_favour_of_stored_base_offset() -> None:
    data = bytearray(batch(RECORDS[:2]))
    struct.pack_into(">q", data, 0, 999_999)  # outside the CRC
    out = decode_records([Stored(7, 2, bytes(data))], 0, 100)
    assert out.offsets == [7, 8]


def test_only_offsets_in_the_requested_range_are_returned() -> None:
    batches = stored([batch(), batch(), batch()], first_offset=10)
    out = decode_records(batches, 13, 22)
    assert out.offsets == list(range(13, 22))
    assert out.values[0] == RECORDS[3][1]


def test_log_append_time_batches_use_max_timestamp_for_every_record() -> None:
    out = decode_records(stored([batch(log_append_time=True)]), 0, 10)
    assert set(out.timestamps) == {1_700_000_000_004}


def test_control_batches_are_skipped_and_committed_transactions_are_kept() -> None:
    data = batch(RECORDS[:2], transactional=True, producer_id=5)
    out = decode_records(stored([data, control_batch(5, commit=True)]), 0, 10)
    assert out.offsets == [0, 1]
    assert out.skipped_control == 1


def test_aborted_transaction_with_marker_in_range_is_dropped() -> None:
    aborted = batch(RECORDS[:2], transactional=True, producer_id=5)
    other = batch(RECORDS[:1], transactional=True, producer_id=6)
    plain = batch(RECORDS[:1])
    batches = stored([aborted, other, plain, control_batch(5, commit=False), control_batch(6, commit=True)])
    out = decode_records(batches, 0, 100)
    assert out.offsets == [2, 3]
    assert out.skipped_aborted == 2


def test_aborted_transaction_whose_marker_lies_beyond_the_range_uses_the_aborted_list() -> None:
    batches = stored([batch(RECORDS[:2], transactional=True, producer_id=9), batch(RECORDS[:1])])
    assert decode_records(batches, 0, 3, aborted_transactions=[AbortedTransaction(9, 0)]).offsets == [2]
    assert decode_records(batches, 0, 3).offsets == [0, 1, 2]


def test_corrupted_crc_yields_a_batch_error_and_other_batches_still_decode() -> None:
    good = batch()
    bad = bytearray(batch())
    bad[-3] ^= 0xFF
    out = decode_records(stored([good, bytes(bad), good]), 0, 100)
    assert out.offsets == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    assert len(out.errors) == 1
    assert out.errors[0].base_offset == 5 and out.errors[0].record_count == 5
    assert "CRC32C mismatch" in out.errors[0].reason


@pytest.mark.parametrize("cut", [0, 10, 60, 61, 80])
def test_truncated_batch_yields_a_clear_error(cut: int) -> None:
    out = decode_records([Stored(0, 5, batch()[:cut])], 0, 100)
    assert out.offsets == []
    assert "truncated" in out.errors[0].reason or "length" in out.errors[0].reason


def test_records_garbage_with_valid_crc_is_reported_not_raised() -> None:
    data = bytearray(batch())
    data[61] = 0x7E  # first record's length: 63 (zig-zag), wrong
    write_crc(data)
    out = decode_records(stored([bytes(data)]), 0, 100)
    assert out.offsets == [] and len(out.errors) == 1


def test_bad_compressed_data_is_reported() -> None:
    data = bytearray(batch(RECORDS, Compression.LZ4))
    data[70:80] = b"\x00" * 10
    write_crc(data)
    out = decode_records(stored([bytes(data)]), 0, 100)
    assert "cannot decompress (lz4)" in out.errors[0].reason


def test_wrong_magic_is_reported() -> None:
    data = bytearray(batch())
    data[16] = 1
    out = decode_records(stored([bytes(data)]), 0, 100)
    assert "magic 1" in out.errors[0].reason


def test_large_varints_and_negative_timestamp_deltas_decode() -> None:
    records = [
        Record(b"k" * 70_000, b"v" * 300_000, timestamp=2_000_000_000_000),
        Record(None, None, timestamp=1_000_000_000_000),
    ]
    out = decode_records(stored([build_batch(records)]), 0, 10)
    assert out.timestamps == [2_000_000_000_000, 1_000_000_000_000]
    assert out.keys[0] == b"k" * 70_000 and out.values[1] is None


def test_memoryview_payloads_are_accepted() -> None:
    out = decode_records([Stored(0, 5, memoryview(batch(RECORDS, Compression.ZSTD)))], 0, 10)
    assert out.values == [r[1] for r in RECORDS]


def test_a_batch_spanning_more_offsets_than_stored_is_an_error() -> None:
    out = decode_records([Stored(0, 3, batch())], 0, 100)
    assert out.offsets == [] and "spans 5 offsets" in out.errors[0].reason


def test_offset_delta_beyond_last_offset_delta_is_an_error() -> None:
    data = bytearray(batch(RECORDS[:2]))
    struct.pack_into(">i", data, 23, 0)  # lastOffsetDelta 0 although the 2nd record has delta 1
    write_crc(data)
    out = decode_records([Stored(0, 2, bytes(data))], 0, 100)
    assert out.offsets == [] and "offset delta 1" in out.errors[0].reason


def test_an_earlier_aborted_transaction_does_not_abort_the_producers_next_one() -> None:
    # Producer 9 aborted a transaction at offsets 0..1 (marker at 2, before the decoded range) and
    # then wrote a new transaction at 3..4 whose commit marker lies beyond the range.
    batches = stored(
        [
            batch(RECORDS[:2], transactional=True, producer_id=9),
            control_batch(9, commit=False),
            batch(RECORDS[:2], transactional=True, producer_id=9),
        ]
    )
    with_end = [AbortedTransaction(9, 0, last_offset=2)]
    assert decode_records(batches[2:], 3, 5, aborted_transactions=with_end).offsets == [3, 4]
    assert decode_records(batches, 0, 5, aborted_transactions=[AbortedTransaction(9, 0)]).offsets == [3, 4]
