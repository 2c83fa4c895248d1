"""Header-only checks: what the broker runs on every Produce payload, and what a reader checks of a
stored batch. Each parser gets its input whole, cut at every byte and with bytes after it."""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import partial

import crc32c
import pytest

from tabletopic.records.compression import Compression
from tabletopic.records.crc import batch_crc, whole_batch_crc, write_crc
from tabletopic.records.decoder import decode_records
from tabletopic.records.errors import BatchFault, RecordBatchError
from tabletopic.records.header import (
    HEADER_SIZE,
    base_timestamp_of,
    max_timestamp_of,
    parse_stored_header,
    record_count_of,
    validate_batches,
    with_log_append_time,
)
from tests.records.samples import RECORDS, T0, batch, stored


def _fault(call: Callable[[], object]) -> tuple[BatchFault, str]:
    with pytest.raises(RecordBatchError) as info:
        call()
    return info.value.fault, str(info.value)


def test_header_fields_come_back_as_written() -> None:
    data = batch(
        RECORDS,
        Compression.GZIP,
        transactional=True,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=9,
        base_offset=1234,
    )
    (header,) = validate_batches(data)
    assert (header.position, header.size, header.batch_length) == (0, len(data), len(data) - 12)
    assert (header.base_offset, header.partition_leader_epoch, header.magic) == (1234, 9, 2)
    assert header.crc == batch_crc(data)
    assert header.compression == Compression.GZIP
    assert header.is_transactional and not header.is_control and not header.log_append_time
    assert (header.record_count, header.last_offset_delta) == (5, 4)
    assert (header.base_timestamp, header.max_timestamp) == (T0, T0 + 4)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    assert header.last_sequence == 21
    assert parse_stored_header(data) == header


def test_a_payload_of_several_batches_is_split_at_their_boundaries() -> None:
    first, second = batch(RECORDS[:2]), batch(RECORDS, Compression.LZ4)
    headers = validate_batches(first + second)
    assert [(h.position, h.size, h.record_count) for h in headers] == [
        (0, len(first), 2),
        (len(first), len(second), 5),
    ]
    assert validate_batches(memoryview(first + second)) == headers
    assert validate_batches(b"") == []


def test_every_truncation_is_corrupt_with_the_brokers_messages() -> None:
    data = batch(RECORDS[:2])
    for cut in range(1, len(data)):
        fault, message = _fault(partial(validate_batches, data[:cut]))
        assert fault is BatchFault.CORRUPT, cut
        if cut <= 16:
            assert message == "truncated batch header at byte 0"
        elif cut < HEADER_SIZE:
            assert message == "bad batch header at byte 0"
        else:
            assert message == f"batch length {len(data) - 12} at byte 0 does not fit the {cut}-byte payload"


def test_bytes_after_the_last_batch_are_a_truncated_next_batch() -> None:
    data = batch(RECORDS[:2])
    for extra in range(1, HEADER_SIZE + 1):
        fault, message = _fault(partial(validate_batches, data + b"\x02" * extra))
        assert fault is BatchFault.CORRUPT, extra
        assert message.endswith(f"at byte {len(data)}") or f"at byte {len(data)} does not fit" in message


def test_old_message_formats_are_unsupported_and_unknown_ones_corrupt() -> None:
    for magic, expected in ((0, BatchFault.UNSUPPORTED_FORMAT), (1, BatchFault.UNSUPPORTED_FORMAT)):
        data = bytearray(batch())
        data[16] = magic
        assert _fault(partial(validate_batches, bytes(data))) == (
            expected,
            f"message format v{magic} is not supported; only record batch v2 is",
        )
        fault, message = _fault(partial(parse_stored_header, bytes(data)))
        assert (fault, message) == (expected, f"unsupported record batch magic {magic} (only v2)")
    data = bytearray(batch())
    data[16] = 3
    assert _fault(lambda: validate_batches(bytes(data))) == (BatchFault.CORRUPT, "bad batch header at byte 0")


def test_crc_mismatch_is_corrupt_unless_not_verified() -> None:
    data = bytearray(batch())
    data[-1] ^= 0x01
    fault, message = _fault(lambda: validate_batches(bytes(data)))
    assert fault is BatchFault.CORRUPT
    assert message.startswith("batch at byte 0 has CRC 0x") and ", computed 0x" in message
    assert validate_batches(bytes(data), verify_crc=False)[0].record_count == 5


def test_empty_batches_and_wrong_offset_deltas_are_invalid_records() -> None:
    empty = batch([])
    assert _fault(lambda: validate_batches(empty)) == (
        BatchFault.INVALID_RECORD,
        "batch at byte 0 has record count 0 and last offset delta -1",
    )
    assert parse_stored_header(empty).record_count == 0  # a reader just finds nothing in it
    data = bytearray(batch(RECORDS[:2]))
    struct.pack_into(">i", data, 23, 0)
    write_crc(data)
    assert _fault(lambda: validate_batches(bytes(data))) == (
        BatchFault.INVALID_RECORD,
        "batch at byte 0 has record count 2 and last offset delta 0",
    )


def test_stored_header_whole_truncated_and_with_trailing_bytes() -> None:
    data = batch(RECORDS[:2])
    assert parse_stored_header(data).record_count == 2
    for cut in range(len(data)):
        fault, message = _fault(partial(parse_stored_header, data[:cut]))
        assert fault is BatchFault.CORRUPT
        assert "truncated" in message or "length" in message
    fault, message = _fault(lambda: parse_stored_header(data + b"\x00"))
    assert (fault, message) == (
        BatchFault.CORRUPT,
        f"batch length field says {len(data)} bytes but the batch has {len(data) + 1}",
    )
    negative = bytearray(data)
    struct.pack_into(">i", negative, 57, -1)
    assert _fault(lambda: parse_stored_header(bytes(negative))) == (
        BatchFault.INVALID_RECORD,
        "negative record count -1",
    )


def test_log_append_time_stamp_sets_the_type_and_max_timestamp_and_keeps_the_crc_valid() -> None:
    data = batch(RECORDS, Compression.ZSTD)
    stamped = with_log_append_time(memoryview(data), 1_800_000_000_000)
    (header,) = validate_batches(bytes(stamped))  # verifies the recomputed CRC
    assert header.log_append_time and header.max_timestamp == 1_800_000_000_000
    assert validate_batches(data)[0].max_timestamp == T0 + 4  # the original is untouched
    out = decode_records(stored([bytes(stamped)]), 0, 10)
    assert out.timestamps == [1_800_000_000_000] * 5


def test_single_field_reads() -> None:
    data = batch(RECORDS[:3])
    assert (base_timestamp_of(data), max_timestamp_of(data), record_count_of(data)) == (T0, T0 + 2, 3)


def test_the_whole_batch_crc_follows_from_the_verified_one() -> None:
    data = batch(RECORDS, base_offset=7)
    (header,) = validate_batches(data)
    assert whole_batch_crc(data, header.crc) == crc32c.crc32c(data)
    assert whole_batch_crc(memoryview(data), batch_crc(data)) == crc32c.crc32c(data)
