"""Kafka record batch v2 decoding into columns, for the table pipeline's Spark tasks.

The broker stores every batch exactly as the producer sent it (DESIGN.md §4), so the bytes here are
the wire format of Kafka's ``DefaultRecordBatch``: a 61-byte header (baseOffset, batchLength,
partitionLeaderEpoch, magic, CRC32C over everything after the CRC field, attributes, lastOffsetDelta,
baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, record count) followed by the
records, possibly compressed as one block. Each record is ``length, attributes, timestampDelta,
offsetDelta, key, value, headers`` with zig-zag varints for every length and delta.

The header's baseOffset is whatever the producer wrote (usually 0): the real base offset is the one
s3stream assigned, :attr:`StoredBatch.base_offset`.

This code runs for millions of records per task, so the record loop is written for CPython speed:
one ``bytes`` buffer per batch (indexing ``bytes`` is faster than ``memoryview``), a single-byte fast
path for varints (almost every length and delta fits in 7 bits), locals instead of attribute lookups,
and columns appended to plain lists that Arrow converts in C. A damaged batch becomes a
:class:`BatchError` and decoding carries on with the next batch: one bad batch never fails the job
by itself, the caller decides with ``errors.tolerance``.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import cramjam
import crc32c

from tabletopic.s3stream.streams import StoredBatch

HEADER_SIZE = 61
CRC_START = 21  # the CRC covers attributes .. end of batch

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

# Decompressed batches larger than this are refused: a corrupt or hostile batch must not exhaust
# the memory of a Spark worker (Kafka's own message.max.bytes is far below this).
MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_HEADER = struct.Struct(">qiiBIhiqqqhii")
_BE_INT32 = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")


class RecordBatchError(ValueError):
    """A batch cannot be decoded: bad magic, CRC mismatch, truncation, bad compression, bad record."""


@dataclass(frozen=True, slots=True)
class BatchError:
    """One batch that could not be decoded; its offsets are missing from the output."""

    base_offset: int
    record_count: int
    reason: str


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """As in Kafka's Fetch response / transaction index: ``producer_id``'s transaction that began at
    ``first_offset`` was aborted; ``last_offset`` is its ABORT marker's offset when known. The
    marker may lie outside the decoded range, which is why the broker's list is needed at all."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass(slots=True)
class DecodedRecords:
    """Decoded records of one partition as parallel columns (one entry per record).

    ``headers`` holds one tuple of ``(key, value)`` pairs per record; header keys are UTF-8 text
    (malformed UTF-8 is replaced by U+FFFD: a bad header key must not lose the record, and Arrow
    refuses lone surrogates), values bytes or None.
    """

    partition: int
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[tuple[tuple[str, bytes | None], ...]] = field(default_factory=list)
    errors: list[BatchError] = field(default_factory=list)
    skipped_control: int = 0
    skipped_aborted: int = 0

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)


def parse_header(payload: bytes | memoryview) -> BatchHeader:
    """Parse and sanity-check the 61-byte header. Raises RecordBatchError."""
    if len(payload) < HEADER_SIZE:
        raise RecordBatchError(f"truncated batch: {len(payload)} bytes, header needs {HEADER_SIZE}")
    header = BatchHeader(*_HEADER.unpack_from(payload, 0))
    if header.magic != 2:
        raise RecordBatchError(f"unsupported record batch magic {header.magic} (only v2)")
    if header.batch_length + 12 != len(payload):
        raise RecordBatchError(
            f"batch length field says {header.batch_length + 12} bytes but the batch has {len(payload)}"
        )
    if header.record_count < 0:
        raise RecordBatchError(f"negative record count {header.record_count}")
    return header


def check_crc(payload: bytes | memoryview, header: BatchHeader) -> None:
    actual = crc32c.crc32c(memoryview(payload)[CRC_START:])
    if actual != header.crc:
        raise RecordBatchError(f"CRC32C mismatch: header says {header.crc:#010x}, data has {actual:#010x}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress a batch's records block. Raises RecordBatchError."""
    try:
        if codec == COMPRESSION_NONE:
            return bytes(data)
        if codec == COMPRESSION_GZIP:
            out = bytes(cramjam.gzip.decompress(data))
        elif codec == COMPRESSION_SNAPPY:
            out = _snappy(bytes(data))
        elif codec == COMPRESSION_LZ4:
            out = bytes(cramjam.lz4.decompress(data))
        elif codec == COMPRESSION_ZSTD:
            out = bytes(cramjam.zstd.decompress(data))
        else:
            raise RecordBatchError(f"unknown compression codec {codec}")
    except RecordBatchError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and ValueErrors
        raise RecordBatchError(f"cannot decompress ({_CODEC_NAMES.get(codec, codec)}): {exc}") from exc
    if len(out) > MAX_DECOMPRESSED_SIZE:
        raise RecordBatchError(f"decompressed batch of {len(out)} bytes exceeds {MAX_DECOMPRESSED_SIZE}")
    return out


_CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _snappy(data: bytes) -> bytes:
    """Kafka's Java client writes snappy in xerial's framing (magic, then length-prefixed blocks);
    librdkafka and others may send a bare snappy block. Accept both."""
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos = 16  # magic(8) + version(4) + compatible version(4)
    parts: list[bytes] = []
    total = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise RecordBatchError("truncated xerial snappy block length")
        (size,) = _BE_INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise RecordBatchError("truncated xerial snappy block")
        part = bytes(cramjam.snappy.decompress_raw(data[pos : pos + size]))
        total += len(part)
        if total > MAX_DECOMPRESSED_SIZE:
            raise RecordBatchError(f"decompressed batch exceeds {MAX_DECOMPRESSED_SIZE} bytes")
        parts.append(part)
        pos += size
    return b"".join(parts)


def decode_batches(
    batches: Iterable[StoredBatch],
    start_offset: int,
    end_offset: int,
    partition: int = 0,
    aborted_transactions: Sequence[AbortedTransaction] = (),
    verify_crc: bool = True,
) -> DecodedRecords:
    """Decode the records with offsets in ``[start_offset, end_offset)`` from stored batches.

    Control batches (transaction markers) are skipped. Transactional data is read committed: a
    transactional batch is dropped when the next marker of its producer inside ``batches`` is an
    ABORT, or — when that marker lies outside the batches — when ``aborted_transactions`` (as kept
    by the broker's transaction index) says its transaction was aborted. Callers must not ask past
    the partition's last stable offset.

    Args:
        batches: stored batches in offset order (a slice may start before ``start_offset`` and end
            after ``end_offset``; excess records are dropped).
        start_offset: first offset wanted.
        end_offset: one past the last offset wanted.
        partition: the Kafka partition, copied to the output.
        aborted_transactions: aborted transactions overlapping the range (may be empty).
        verify_crc: check each batch's CRC32C (on by default; ~77 µs per MB).

    Returns:
        The columns, plus one :class:`BatchError` per undecodable batch in the range.
    """
    out = DecodedRecords(partition)
    batch_list = [b for b in batches if b.next_offset > start_offset and b.base_offset < end_offset]
    aborted_batches = _aborted_batch_offsets(batch_list, aborted_transactions)
    for batch in batch_list:
        try:
            header = parse_header(batch.payload)
            if verify_crc:
                check_crc(batch.payload, header)
            if header.record_count and not 0 <= header.last_offset_delta < batch.record_count:
                raise RecordBatchError(
                    f"batch header spans {header.last_offset_delta + 1} offsets but was stored with "
                    f"{batch.record_count}"
                )
            if header.is_control:
                out.skipped_control += header.record_count
                continue
            if batch.base_offset in aborted_batches:
                out.skipped_aborted += header.record_count
                continue
            data = decompress(header.compression, memoryview(batch.payload)[HEADER_SIZE:])
            _decode_records(out, data, header, batch.base_offset, start_offset, end_offset)
        except RecordBatchError as exc:
            out.errors.append(BatchError(batch.base_offset, batch.record_count, str(exc)))
    return out


def _aborted_batch_offsets(batches: Sequence[StoredBatch], aborted: Sequence[AbortedTransaction]) -> set[int]:
    """Base offsets of transactional batches whose transaction was aborted.

    A data batch belongs to the transaction its producer's next marker closes. When that marker is
    in ``batches`` it decides; otherwise the broker's aborted list does: an entry covers the
    producer's batches from ``first_offset`` up to its ``last_offset`` (the marker) or, when that is
    unknown, up to the producer's next marker seen here — Kafka's consumer rule.
    """
    headers: list[tuple[StoredBatch, BatchHeader]] = []
    for batch in batches:
        try:
            header = parse_header(batch.payload)
        except RecordBatchError:
            continue  # reported by the main loop
        if header.is_transactional:
            headers.append((batch, header))
    if not headers:
        return set()
    markers: dict[int, list[tuple[int, bool]]] = {}  # producer id -> [(offset, is_abort)] ascending
    for batch, header in headers:
        if header.is_control:
            kind = _control_type(batch.payload, header)
            if kind is not None:
                markers.setdefault(header.producer_id, []).append((batch.base_offset, kind == CONTROL_ABORT))
    result: set[int] = set()
    for batch, header in headers:
        if header.is_control:
            continue
        pid, offset = header.producer_id, batch.base_offset
        own = markers.get(pid, [])
        index = bisect.bisect_right(own, (offset, True))
        if index < len(own):
            if own[index][1]:
                result.add(offset)
            continue
        previous_marker = own[index - 1][0] if index else None
        for txn in aborted:
            if txn.producer_id != pid or txn.first_offset > offset:
                continue
            if txn.last_offset is not None and txn.last_offset < offset:
                continue
            if previous_marker is not None and previous_marker >= txn.first_offset:
                continue  # that transaction already ended at a marker before this batch
            result.add(offset)
            break
    return result


def _control_type(payload: bytes | memoryview, header: BatchHeader) -> int | None:
    """The marker type of a control batch (key = version int16, type int16), None if unreadable."""
    try:
        data = decompress(header.compression, memoryview(payload)[HEADER_SIZE:])
        holder = DecodedRecords(0)
        _decode_records(holder, data, header, 0, 0, 1 << 62)
    except RecordBatchError:
        return None
    if not holder.keys or holder.keys[0] is None or len(holder.keys[0]) < 4:
        return None
    return int(_CONTROL_KEY.unpack_from(holder.keys[0], 0)[1])


def _decode_records(
    out: DecodedRecords, buf: bytes, header: BatchHeader, base_offset: int, start: int, end: int
) -> None:
    """Append the batch's records within ``[start, end)`` to ``out`` (all or nothing)."""
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[tuple[str, bytes | None], ...]] = []
    base_ts = header.base_timestamp
    append_time = header.max_timestamp if header.log_append_time else None
    n = len(buf)
    pos = 0
    add_offset = offsets.append
    add_ts = timestamps.append
    add_key = keys.append
    add_value = values.append
    add_headers = headers.append
    varint = _varint
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
    # When the whole batch lies inside the range the per-record range test is skipped.
    last_delta = header.last_offset_delta
    whole = start <= base_offset and base_offset + last_delta < end
    # Varints are inlined for one and two bytes (lengths up to 8 KiB, deltas up to 4095): a call
    # costs more than the decoding itself.
    try:
        for _ in range(header.record_count):
            # record length (zig-zag varint)
            b = buf[pos]
            if b < 0x80:
                length = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                length = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                length, pos = varint(buf, pos)
            length = (length >> 1) ^ -(length & 1)
            rec_end = pos + length
            if length < 6 or rec_end > n:
                raise RecordBatchError(f"record length {length} runs past the batch ({n - pos} bytes left)")
            pos += 1  # record attributes (unused)
            b = buf[pos]
            if b < 0x80:
                ts_delta = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                ts_delta = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                ts_delta, pos = varint(buf, pos)
            ts_delta = (ts_delta >> 1) ^ -(ts_delta & 1)
            b = buf[pos]
            if b < 0x80:
                off_delta = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                off_delta = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                off_delta, pos = varint(buf, pos)
            off_delta = (off_delta >> 1) ^ -(off_delta & 1)
            # key
            b = buf[pos]
            if b < 0x80:
                klen = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                klen = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                klen, pos = varint(buf, pos)
            klen = (klen >> 1) ^ -(klen & 1)
            if klen < 0:
                key = None
            else:
                key = buf[pos : pos + klen]
                pos += klen
            # value
            b = buf[pos]
            if b < 0x80:
                vlen = b
                pos += 1
            elif buf[pos + 1] < 0x80:
                vlen = (b & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                vlen, pos = varint(buf, pos)
            vlen = (vlen >> 1) ^ -(vlen & 1)
            if vlen < 0:
                value = None
            else:
                value = buf[pos : pos + vlen]
                pos += vlen
            # headers
            b = buf[pos]
            if b == 0:
                pos += 1
                hdrs = no_headers
            else:
                hdrs, pos = _headers(buf, pos)
            if pos != rec_end:
                raise RecordBatchError(f"record at offset delta {off_delta} has {rec_end - pos} stray bytes")
            if not 0 <= off_delta <= last_delta:
                raise RecordBatchError(f"offset delta {off_delta} outside the batch's 0..{last_delta}")
            offset = base_offset + off_delta
            if whole or start <= offset < end:
                add_offset(offset)
                add_ts(base_ts + ts_delta if append_time is None else append_time)
                add_key(key)
                add_value(value)
                add_headers(hdrs)
    except IndexError:
        raise RecordBatchError("truncated record") from None
    if pos != n:
        raise RecordBatchError(f"{n - pos} bytes after the last of {header.record_count} records")
    out.offsets += offsets
    out.timestamps += timestamps
    out.keys += keys
    out.values += values
    out.headers += headers


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 (the caller undoes zig-zag). At most 10 bytes."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise RecordBatchError("varint longer than 10 bytes")


def _zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _varint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def _headers(buf: bytes, pos: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, pos = _zigzag(buf, pos)
    if count < 0 or count > len(buf) - pos:
        raise RecordBatchError(f"bad header count {count}")
    items: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = _zigzag(buf, pos)
        if klen < 0:
            raise RecordBatchError("null header key")
        key = buf[pos : pos + klen].decode("utf-8", "replace")
        pos += klen
        vlen, pos = _zigzag(buf, pos)
        if vlen < 0:
            items.append((key, None))
        else:
            items.append((key, buf[pos : pos + vlen]))
            pos += vlen
    return tuple(items), pos
