"""Round trips: encode -> validate (the broker's check) -> decode (the table's) gives the input back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic.records.columns import DecodedRecords
from tabletopic.records.compression import Compression
from tabletopic.records.decoder import decode_records
from tabletopic.records.encoder import Record, build_batch, build_control_batch, uvarint, zigzag
from tabletopic.records.header import validate_batches
from tabletopic.records.transactions import ControlType, control_type_of
from tests.records.samples import RECORDS, T0, batch, stored


def _assert_decodes_to(out: DecodedRecords, records: list[Record], first_offset: int = 0) -> None:
    assert out.errors == []
    assert out.offsets == list(range(first_offset, first_offset + len(records)))
    assert out.keys == [r.key for r in records]
    assert out.values == [r.value for r in records]
    assert out.headers == [tuple(r.headers) for r in records]


@pytest.mark.parametrize("xerial", [False, True])
@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_round_trips_through_validation_and_decoding(codec: Compression, xerial: bool) -> None:
    data = batch(RECORDS, codec, xerial_snappy=xerial, producer_id=8, producer_epoch=1, base_sequence=40)
    (header,) = validate_batches(data)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (8, 1, 40)
    out = decode_records(stored([data], first_offset=70), 0, 100, partition=2)
    _assert_decodes_to(out, RECORDS, 70)
    assert out.timestamps == [T0 + i for i in range(5)]


def test_explicit_timestamps_may_go_backwards_and_set_base_and_max() -> None:
    records = [Record(b"a", b"1", timestamp=T0 + 50), Record(b"b", b"2", timestamp=T0), Record(b"c", b"3")]
    data = build_batch(records, timestamp=T0 + 10)
    (header,) = validate_batches(data)
    assert (header.base_timestamp, header.max_timestamp) == (T0 + 50, T0 + 50)
    assert decode_records(stored([data]), 0, 3).timestamps == [T0 + 50, T0, T0 + 12]


def test_default_timestamp_is_now() -> None:
    import time

    before = int(time.time() * 1000)
    (header,) = validate_batches(build_batch([Record(None, b"v")]))
    assert before <= header.base_timestamp <= int(time.time() * 1000)


@pytest.mark.parametrize("control_type", list(ControlType))
def test_control_batches_carry_their_marker(control_type: ControlType) -> None:
    data = build_control_batch(control_type, producer_id=12, producer_epoch=4, coordinator_epoch=6)
    (header,) = validate_batches(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (12, 4)
    assert control_type_of(data, header) == control_type
    out = decode_records(stored([data]), 0, 10)
    assert (out.offsets, out.skipped_control) == ([], 1)


def test_control_type_of_an_unreadable_control_batch_is_none() -> None:
    data = batch([Record(b"\x00", b"")], control=True, transactional=True)
    (header,) = validate_batches(data)
    assert control_type_of(data, header) is None


def test_unsigned_varints_of_one_byte_and_more_and_a_negative_value_is_refused() -> None:
    """Values below 128 come from a table; a negative one is a caller's bug and must not be read
    from its end (it would be written as a valid-looking byte)."""
    assert [uvarint(v) for v in (0, 1, 127, 128, 300, 2**21)] == [
        b"\x00",
        b"\x01",
        b"\x7f",
        b"\x80\x01",
        b"\xac\x02",
        b"\x80\x80\x80\x01",
    ]
    with pytest.raises(ValueError):
        uvarint(-1)


@pytest.mark.parametrize(
    "value", [0, 1, -1, 63, -64, 64, -65, 8191, 8192, 2**31, -(2**31), 2**63 - 1, -(2**63)]
)
def test_zigzag_varints_read_back_through_the_record_loop(value: int) -> None:
    # The decoder reads a record's timestamp delta as a zig-zag varint, like every length and delta.
    records = [Record(None, b"x", timestamp=0), Record(None, b"y", timestamp=value)]
    out = decode_records(stored([build_batch(records)]), 0, 2)
    assert out.errors == [] and out.timestamps == [0, value]
    assert len(zigzag(value)) == max(1, (((value << 1) ^ (value >> 63)).bit_length() + 6) // 7)


_bytes = st.none() | st.binary(max_size=300)
_records = st.lists(
    st.builds(
        Record,
        key=_bytes,
        value=_bytes | st.binary(min_size=8000, max_size=9000),
        headers=st.lists(st.tuples(st.text(max_size=10), _bytes), max_size=3),
        timestamp=st.none() | st.integers(0, 2**42),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(
    records=_records,
    codec=st.sampled_from(list(Compression)),
    xerial=st.booleans(),
    transactional=st.booleans(),
    producer_id=st.integers(-1, 2**40),
    first_offset=st.integers(0, 2**40),
)
def test_any_records_round_trip(
    records: list[Record],
    codec: Compression,
    xerial: bool,
    transactional: bool,
    producer_id: int,
    first_offset: int,
) -> None:
    data = build_batch(
        records,
        compression=codec,
        xerial_snappy=xerial,
        timestamp=T0,
        transactional=transactional,
        producer_id=producer_id,
    )
    (header,) = validate_batches(data)
    assert header.record_count == len(records) and header.is_transactional == transactional
    expected_timestamps = [T0 + i if r.timestamp is None else r.timestamp for i, r in enumerate(records)]
    assert (header.base_timestamp, header.max_timestamp) == (expected_timestamps[0], max(expected_timestamps))
    out = decode_records(stored([data], first_offset), 0, 2**62)
    _assert_decodes_to(out, records, first_offset)
    assert out.timestamps == expected_timestamps
