"""Garbage on purpose: no input may crash the header checks or the decoder; they may only refuse a
batch (RecordBatchError) or report it (a per-batch error beside the rows)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic.records.compression import Compression
from tabletopic.records.crc import write_crc
from tabletopic.records.decoder import decode_records
from tabletopic.records.encoder import Record
from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import parse_stored_header, validate_batches
from tests.records.samples import Stored, batch

RECORDS = [Record(b"key", b"value" * 10, [("h", b"v")]), Record(None, None), Record(b"k" * 200, b"v" * 1000)]


def test_every_truncation_of_every_codec_is_a_batch_error() -> None:
    for codec in Compression:
        data = batch(RECORDS, codec)
        for cut in range(len(data)):
            out = decode_records([Stored(0, 3, data[:cut])], 0, 10)
            assert out.offsets == [] and len(out.errors) == 1, (codec, cut)


def test_trailing_bytes_after_a_stored_batch_are_a_batch_error() -> None:
    for codec in Compression:
        data = batch(RECORDS, codec)
        for extra in (b"\x00", b"\x00" * 61, data):
            out = decode_records([Stored(0, 3, data + extra)], 0, 10)
            assert out.offsets == [] and "batch length field says" in out.errors[0].reason


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_byte_flips_with_a_valid_crc_never_raise(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from(list(Compression)))
    buf = bytearray(batch(RECORDS, codec))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(21, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    write_crc(buf)
    out = decode_records([Stored(0, 3, bytes(buf))], 0, 10)
    # A flip may also turn the batch into a control batch or move offset deltas out of range;
    # what matters is that nothing raises and an error never comes with rows of the same batch.
    assert len(out.errors) <= 1
    assert not (out.errors and out.offsets)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_payload_bytes_are_batch_errors(payload: bytes) -> None:
    out = decode_records([Stored(0, 1, payload)], 0, 10)
    assert len(out.errors) == 1 or out.offsets


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.builds(lambda b, tail: b + tail, st.just(batch(RECORDS)), st.binary()))
def test_header_checks_refuse_garbage_only_with_record_batch_errors(payload: bytes) -> None:
    for check in (validate_batches, parse_stored_header):
        try:
            check(payload)
        except RecordBatchError:
            pass
