"""The codec against other implementations of the format, so a mistake shared by our encoder and
decoder cannot hide: aiokafka's reader and builder (all codecs through cramjam) and kafka-python's
builder (the bytes a real producer sends)."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from tabletopic.records.compression import Compression
from tabletopic.records.decoder import decode_records
from tabletopic.records.encoder import Record
from tabletopic.records.header import validate_batches
from tests.records.samples import RECORDS, T0, batch, stored

# Compressible enough that the builders (which send uncompressed when it does not pay) compress.
BIG = [*RECORDS, Record(b"big", b"abcdefgh" * 2000, [("k", b"v")])]


@pytest.mark.parametrize("xerial", [False, True])
@pytest.mark.parametrize("codec", list(Compression))
def test_aiokafka_reads_our_batches(codec: Compression, xerial: bool) -> None:
    data = batch(BIG, codec, xerial_snappy=xerial, producer_id=3, producer_epoch=1, base_sequence=5)
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert (theirs.compression_type, theirs.producer_id, theirs.base_sequence) == (codec, 3, 5)
    records = list(theirs)
    assert [(r.key, r.value, list(r.headers)) for r in records] == [
        (r.key, r.value, list(r.headers)) for r in BIG
    ]
    assert [r.timestamp for r in records] == [T0 + i for i in range(len(BIG))]


@pytest.mark.parametrize("codec", list(Compression))
def test_we_read_aiokafkas_batches(codec: Compression) -> None:
    builder = DefaultRecordBatchBuilder(2, codec, True, 11, 2, 9, 1 << 30)
    for i, r in enumerate(BIG):
        builder.append(i, T0 + i, r.key, r.value, list(r.headers))
    data = bytes(builder.build())
    (header,) = validate_batches(data)
    assert header.compression == codec and header.is_transactional
    out = decode_records(stored([data]), 0, 100)
    assert out.errors == []
    assert (out.keys, out.values) == ([r.key for r in BIG], [r.value for r in BIG])
    assert out.headers == [tuple(r.headers) for r in BIG]


def test_uncompressed_batches_are_byte_for_byte_kafka_pythons() -> None:
    builder = KafkaPythonBuilder(2, 0, False, 7, 0, 3, 1 << 30)
    for i, r in enumerate(RECORDS):
        builder.append(i, T0 + i, r.key, r.value, list(r.headers))
    ours = batch(RECORDS, producer_id=7, producer_epoch=0, base_sequence=3, partition_leader_epoch=0)
    assert ours == bytes(builder.build())
