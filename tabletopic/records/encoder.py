"""Building record batches the way a producer does, for tests, benchmarks and tools.

Nothing in the broker's or the table pipeline's data path encodes records (the broker stores what
producers send), so this favours being plain over being fast.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from tabletopic.records.compression import Compression, compress
from tabletopic.records.crc import write_crc
from tabletopic.records.header import (
    CONTROL_BIT,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
)
from tabletopic.records.transactions import ControlType, control_record

Header = tuple[str, bytes | None]


class Record(NamedTuple):
    """One record to encode; ``timestamp`` None means the batch's timestamp plus the record's index."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()
    timestamp: int | None = None


def build_batch(
    records: Iterable[Record],
    *,
    compression: Compression = Compression.NONE,
    xerial_snappy: bool = False,
    timestamp: int | None = None,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """One v2 batch holding ``records`` with offset deltas 0, 1, ... (or ``offset_deltas``, with
    ``last_offset_delta`` for the header: a compacted batch keeps its records' offsets and span).

    Args:
        records: what to encode, in order.
        compression: the codec of the records block; ``xerial_snappy`` frames snappy as the Java
            client does (otherwise one bare block, as librdkafka sends).
        timestamp: the timestamp of records that carry none (plus their index); now when None.
            baseTimestamp is the first record's, maxTimestamp the largest.
        log_append_time: set the timestamp type bit (a broker's stamp, normally).
        transactional, control: the attributes bits.
        producer_id, producer_epoch, base_sequence: the idempotent producer fields (-1: none).
        base_offset, partition_leader_epoch: the header fields a broker fills in.
    """
    first = int(time.time() * 1000) if timestamp is None else timestamp
    body = bytearray()
    timestamps: list[int] = []
    for index, record in enumerate(records):
        delta = index if offset_deltas is None else offset_deltas[index]
        ts = first + index if record.timestamp is None else record.timestamp
        timestamps.append(ts)
        body += _record(delta, ts - timestamps[0], record)
    count = len(timestamps)
    block = compress(compression, body, xerial=xerial_snappy)
    attributes = int(compression)
    attributes |= TIMESTAMP_TYPE_BIT if log_append_time else 0
    attributes |= TRANSACTIONAL_BIT if transactional else 0
    attributes |= CONTROL_BIT if control else 0
    batch = bytearray(HEADER_SIZE) + block
    HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,  # the CRC, written below once every covered byte is in place
        attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        timestamps[0] if timestamps else first,
        max(timestamps) if timestamps else first,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    write_crc(batch)
    return bytes(batch)


def build_control_batch(
    control_type: ControlType,
    producer_id: int,
    producer_epoch: int = 0,
    *,
    coordinator_epoch: int = 0,
    timestamp: int | None = None,
) -> bytes:
    """A transaction marker: the control batch a coordinator writes to end ``producer_id``'s
    transaction with COMMIT or ABORT."""
    key, value = control_record(control_type, coordinator_epoch)
    return build_batch(
        [Record(key, value)],
        timestamp=timestamp,
        transactional=True,
        control=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


def _record(offset_delta: int, timestamp_delta: int, record: Record) -> bytes:
    body = bytearray(b"\x00")  # record attributes: unused in v2
    body += zigzag(timestamp_delta)
    body += zigzag(offset_delta)
    body += _nullable(record.key)
    body += _nullable(record.value)
    body += zigzag(len(record.headers))
    for name, value in record.headers:
        body += _nullable(name.encode())
        body += _nullable(value)
    return zigzag(len(body)) + body


def _nullable(data: bytes | None) -> bytes:
    """A varint length (-1 for null) and the bytes."""
    if data is None:
        return zigzag(-1)
    return zigzag(len(data)) + data


def zigzag(value: int) -> bytes:
    """``value`` as a zig-zag varint (what every length and delta in a record is; Avro's longs are
    the same encoding)."""
    return uvarint((value << 1) ^ (value >> 63))


def uvarint(value: int) -> bytes:
    """``value`` (not negative) as an unsigned base-128 varint, low groups first (Kafka's compact
    lengths of flexible versions, and the body of every zig-zag varint)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]  # most lengths and counts: no loop, no new object
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# The varints of 0-127: one byte each, built once.
_ONE_BYTE = [bytes([value]) for value in range(0x80)]
