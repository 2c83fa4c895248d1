"""Garbage on purpose: no input may crash decoding; it may only produce per-batch or per-record errors."""

from __future__ import annotations

import json
import random

import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic.s3stream.streams import StoredBatch
from tabletopic.table.convert.avro import AvroDecoder
from tabletopic.table.records import decode_batches
from tests.table.kafka_batches import CODECS, build_batch
from tests.table.schemas import avro_bytes
from tests.table.test_avro import SCHEMA, make

RECORDS = [(b"key", b"value" * 10, [("h", b"v")]), (None, None, []), (b"k" * 200, b"v" * 1000, [])]


def _fix_crc(buf: bytearray) -> bytes:
    buf[17:21] = crc32c.crc32c(bytes(buf[21:])).to_bytes(4, "big")
    return bytes(buf)


def test_every_truncation_of_every_codec_is_a_batch_error() -> None:
    for codec in CODECS:
        batch = build_batch(RECORDS, codec)
        for cut in range(len(batch)):
            out = decode_batches([StoredBatch(0, 3, batch[:cut])], 0, 10)
            assert out.offsets == [] and len(out.errors) == 1, (codec, cut)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_byte_flips_with_a_valid_crc_never_raise(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from(list(CODECS)))
    buf = bytearray(build_batch(RECORDS, codec))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(21, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    out = decode_batches([StoredBatch(0, 3, _fix_crc(buf))], 0, 10)
    # A flip may also turn the batch into a control batch or move offset deltas out of range;
    # what matters is that nothing raises and an error never comes with rows of the same batch.
    assert len(out.errors) <= 1
    assert not (out.errors and out.offsets)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_payload_bytes_are_batch_errors(payload: bytes) -> None:
    out = decode_batches([StoredBatch(0, 1, payload)], 0, 10)
    assert len(out.errors) == 1 or out.offsets


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_mutated_avro_records_fail_individually_on_both_decoder_paths(data: st.DataObject) -> None:
    good = avro_bytes(SCHEMA, make(random.Random(data.draw(st.integers(0, 1000)))))
    bad = bytearray(good)
    for _ in range(data.draw(st.integers(1, 3))):
        bad[data.draw(st.integers(0, len(bad) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(bad)))
    payloads = [good, bytes(bad[:cut]), good]
    text = json.dumps(SCHEMA)
    fast, fast_failures = AvroDecoder(text).decode(payloads)
    slow, slow_failures = AvroDecoder(text, columnar=False).decode(payloads)
    assert set(fast_failures) <= {1} and set(slow_failures) <= {1}
    assert fast.to_pylist()[0] == fast.to_pylist()[2] == slow.to_pylist()[0]
    if not fast_failures and not slow_failures:
        assert fast.equals(slow)
