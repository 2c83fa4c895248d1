"""Produce requests read by produce_reader: the same request kio reads, records lent or copied,
and malformed bodies refused as MalformedFrame."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from kio.serial import entity_reader, entity_writer

from tabletopic.broker.protocol.codec import parse_request
from tabletopic.broker.protocol.errors import MalformedFrame
from tabletopic.broker.protocol.produce_reader import VERSIONS, _schema


def _frame(
    version: int, transactional_id: str | None = "tx", records: list[bytes | None] | None = None
) -> bytes:
    schema = _schema(version)
    parts = records if records is not None else [b"first batch", None, b"third"]
    request = schema.ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout=timedelta(milliseconds=1500),
        topic_data=(
            schema.TopicProduceData(
                name="orders",
                partition_data=tuple(
                    schema.PartitionProduceData(index=i, records=data) for i, data in enumerate(parts)
                ),
            ),
            schema.TopicProduceData(name="empty", partition_data=()),
        ),
    )
    header = schema.ProduceRequest.__header_schema__(
        request_api_key=0, request_api_version=version, correlation_id=7, client_id="client"
    )
    out = io.BytesIO()
    entity_writer(type(header))(out, header)
    entity_writer(schema.ProduceRequest)(out, request)
    return out.getvalue()


def _kio_body(frame: bytes, version: int) -> object:
    schema = _schema(version)
    view = memoryview(frame)
    _header, size = entity_reader(schema.ProduceRequest.__header_schema__)(view, 0)
    body, _ = entity_reader(schema.ProduceRequest)(view, size)
    return body


@pytest.mark.parametrize("version", list(VERSIONS))
@pytest.mark.parametrize("lend", [False, True])
def test_the_body_read_equals_kios_with_records_lent_or_copied(version: int, lend: bool) -> None:
    frame = _frame(version)
    buffer = bytearray(frame)
    request = parse_request(memoryview(buffer).toreadonly(), lend=lend)
    expected = _kio_body(frame, version)
    assert request.correlation_id == 7
    assert type(request.body) is type(expected)
    assert request.body.transactional_id == "tx" and request.body.acks == -1
    assert request.body.timeout == timedelta(milliseconds=1500)
    got = [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in request.body.topic_data]
    want = [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in expected.topic_data]
    assert got == want
    first = request.body.topic_data[0].partition_data[0].records
    if lend:
        # A read-only view into the frame's own buffer: no copy, and the store keeps it as is.
        assert isinstance(first, memoryview) and first.readonly and first.obj is buffer
    else:
        assert type(first) is bytes


@pytest.mark.parametrize("version", [8, 9])
def test_a_null_transactional_id_and_no_partitions_parse(version: int) -> None:
    request = parse_request(_frame(version, transactional_id=None, records=[]))
    assert request.body.transactional_id is None
    assert [t.partition_data for t in request.body.topic_data] == [(), ()]


@pytest.mark.parametrize("version", [8, 9])
def test_truncated_and_padded_bodies_are_malformed_frames(version: int) -> None:
    frame = _frame(version)
    for cut in range(len(frame) - 1, 20, -3):
        with pytest.raises(MalformedFrame):
            parse_request(frame[:cut])
    with pytest.raises(MalformedFrame, match="left after"):
        parse_request(frame + b"\x00")


def test_a_records_length_past_the_end_is_refused_before_any_copy() -> None:
    frame = bytearray(_frame(8, records=[b"abc"]))
    at = frame.index(b"abc") - 4
    frame[at : at + 4] = (1 << 30).to_bytes(4, "big")
    with pytest.raises(MalformedFrame, match="past the end"):
        parse_request(bytes(frame), lend=True)


def test_an_array_count_larger_than_the_frame_is_refused() -> None:
    frame = bytearray(_frame(8))
    at = frame.index(b"\x00\x06orders") - 4  # the topics array's int32 count
    frame[at : at + 4] = (1 << 30).to_bytes(4, "big")
    with pytest.raises(MalformedFrame, match=r"count .* runs past the end"):
        parse_request(bytes(frame))
