"""Garbage on purpose: no input may crash Avro decoding; it may only produce per-record errors.

(Fuzzing of record batches themselves is in ``tests/records/test_fuzz.py``.)
"""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic.table.convert.avro import AvroDecoder
from tests.support.avro_samples import EVERY_TYPE, every_type_value
from tests.support.schemas import avro_bytes


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_mutated_avro_records_fail_individually_on_both_decoder_paths(data: st.DataObject) -> None:
    good = avro_bytes(EVERY_TYPE, every_type_value(random.Random(data.draw(st.integers(0, 1000)))))
    bad = bytearray(good)
    for _ in range(data.draw(st.integers(1, 3))):
        bad[data.draw(st.integers(0, len(bad) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(bad)))
    payloads = [good, bytes(bad[:cut]), good]
    text = json.dumps(EVERY_TYPE)
    fast, fast_failures = AvroDecoder(text).decode(payloads)
    slow, slow_failures = AvroDecoder(text, columnar=False).decode(payloads)
    assert set(fast_failures) <= {1} and set(slow_failures) <= {1}
    assert fast.to_pylist()[0] == fast.to_pylist()[2] == slow.to_pylist()[0]
    if not fast_failures and not slow_failures:
        assert fast.equals(slow)
