"""Build record batches (magic v2, uncompressed) and kio requests for handler tests."""

from __future__ import annotations

import struct
from typing import Any

import crc32c
from kio.index import load_request_schema

from tabletopic.broker.protocol import build_entity


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return _varint(-1)
    return _varint(len(data)) + data


def make_batch(
    values: list[bytes],
    *,
    key: bytes | None = None,
    timestamp: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
    base_offset: int = 0,
) -> bytes:
    records = bytearray()
    for delta, value in enumerate(values):
        body = (
            b"\x00" + _varint(delta) + _varint(delta) + _bytes_field(key) + _bytes_field(value) + _varint(0)
        )
        records += _varint(len(body)) + body
    after_crc = struct.pack(
        ">hiqqqhii",
        0,
        len(values) - 1,
        timestamp,
        timestamp + len(values) - 1,
        producer_id,
        producer_epoch,
        base_sequence,
        len(values),
    ) + bytes(records)
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # epoch + magic + crc + rest
    return struct.pack(">qiibI", base_offset, batch_length, -1, magic, crc) + after_crc


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A kio request object of one version, from newest-shaped keyword fields."""
    return build_entity(load_request_schema(api_key, version), fields)


def produce_request(topic: str, partition: int, records: bytes, version: int = 9, acks: int = -1) -> Any:
    return request(
        0,
        version,
        transactional_id=None,
        acks=acks,
        timeout=5000,
        topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    )


def fetch_request(
    topic: str,
    partition: int,
    offset: int,
    version: int = 11,
    max_wait: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    topic_id: Any = None,
) -> Any:
    return request(
        1,
        version,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id="",
        topics=[
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
    )
