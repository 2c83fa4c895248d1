"""The C record reader (aiokafka's compiled one) against the pure-Python loop: on any batch, valid
or damaged, both give the same columns and the same per-batch errors."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.records import native
from tabletopic.records.columns import DecodedRecords
from tabletopic.records.compression import Compression, decompress
from tabletopic.records.crc import write_crc
from tabletopic.records.decoder import decode_records
from tabletopic.records.encoder import Record, build_batch
from tabletopic.records.header import HEADER_SIZE, parse_stored_header
from tests.records.samples import RECORDS, T0, Stored, batch, stored

_bytes = st.none() | st.binary(max_size=300)
_records = st.lists(
    st.builds(
        Record,
        _bytes,
        _bytes,
        st.lists(st.tuples(st.text(max_size=8), _bytes), max_size=3),
        st.none() | st.integers(T0 - 10_000, T0 + 10_000),
    ),
    min_size=1,
    max_size=30,
)


def _columns(out: DecodedRecords) -> tuple[object, ...]:
    return (out.offsets, out.timestamps, out.keys, out.values, out.headers, out.errors, out.skipped_control)


def _both(batches: list[Stored], start: int, end: int) -> tuple[DecodedRecords, DecodedRecords]:
    return (
        decode_records(batches, start, end, partition=1, native=True),
        decode_records(batches, start, end, partition=1, native=False),
    )


def test_the_c_reader_is_installed() -> None:
    assert native.available()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_records, min_size=1, max_size=4),
    st.sampled_from(list(Compression)),
    st.booleans(),
    st.integers(0, 150),
    st.integers(0, 150),
    st.integers(0, 1000),
)
def test_c_and_python_readers_give_the_same_columns(
    groups: list[list[Record]], codec: Compression, append_time: bool, start: int, span: int, first: int
) -> None:
    payloads = [build_batch(g, compression=codec, timestamp=T0, log_append_time=append_time) for g in groups]
    batches = stored(payloads, first_offset=first)
    fast, slow = _both(batches, first + start, first + start + span)
    assert _columns(fast) == _columns(slow)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_batches_with_a_valid_crc_decode_alike(data: st.DataObject) -> None:
    # The CRC is recomputed after the damage, so the record loop itself must catch it (or not)
    # exactly as the Python loop does: the C reader hands every batch it rejects to the Python loop.
    codec = data.draw(st.sampled_from([Compression.NONE, Compression.NONE, Compression.LZ4]))
    buf = bytearray(batch(RECORDS, codec))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(21, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    write_crc(buf)
    fast, slow = _both([Stored(40, 5, bytes(buf))], 0, 100)
    assert _columns(fast) == _columns(slow)


def test_an_offset_delta_outside_the_batch_is_the_python_loops_error() -> None:
    payload = build_batch(RECORDS[:2], timestamp=T0, offset_deltas=[0, 7], last_offset_delta=1)
    fast, slow = _both([Stored(0, 2, payload)], 0, 100)
    assert fast.errors == slow.errors and "offset delta 7" in fast.errors[0].reason


def test_a_header_key_that_is_not_utf8_is_replaced_as_the_python_loop_does() -> None:
    payload = bytearray(batch([Record(b"k", b"v", [("\u00e9", b"x")])]))
    at = payload.index("\u00e9".encode())
    payload[at] = 0xFF  # a lone continuation byte: the C reader's strict decode refuses it
    write_crc(payload)
    fast, slow = _both([Stored(0, 1, bytes(payload))], 0, 10)
    assert fast.headers == slow.headers
    assert "\ufffd" in fast.headers[0][0][0] and not fast.errors


def test_a_valid_batch_is_read_by_the_c_reader_itself() -> None:
    for codec in (Compression.NONE, Compression.ZSTD):
        payload = batch(RECORDS, codec)
        header = parse_stored_header(payload)
        block = decompress(header.compression, memoryview(payload)[HEADER_SIZE:])
        out = DecodedRecords(0)
        assert native.append_records_native(out, payload, block, header, 10, 0, 100)
        assert out.offsets == [10, 11, 12, 13, 14] and out.values == [r.value for r in RECORDS]
