"""Stored record batches -> the records of an offset range as columns, for the table pipeline.

The broker stores every batch exactly as the producer sent it, so the bytes decoded here are the
wire format. The header's baseOffset is whatever the producer wrote (usually 0): the real base
offset is the one the store assigned, which comes beside the bytes (:class:`StoredBatchLike`).

A damaged batch becomes a :class:`~tabletopic.records.columns.BatchError` and decoding carries on
with the next batch: one bad batch never fails the job by itself, the caller decides with
``errors.tolerance``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from tabletopic.records.columns import BatchError, DecodedRecords, append_records
from tabletopic.records.compression import decompress
from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import HEADER_SIZE, BatchHeader, check_crc, parse_stored_header
from tabletopic.records.native import append_records_native
from tabletopic.records.native import available as native_available
from tabletopic.records.transactions import AbortedTransaction, aborted_batch_offsets


class StoredBatchLike(Protocol):
    """One batch as a store keeps it: the offsets ``[base_offset, base_offset + record_count)`` it
    was assigned, and its bytes (s3stream's ``StoredBatch`` is one)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def record_count(self) -> int: ...

    @property
    def payload(self) -> bytes | memoryview: ...


def decode_records(
    batches: Iterable[StoredBatchLike],
    start_offset: int,
    end_offset: int,
    partition: int = 0,
    aborted_transactions: Sequence[AbortedTransaction] = (),
    verify_crc: bool = True,
    native: bool = True,
) -> DecodedRecords:
    """Decode the records with offsets in ``[start_offset, end_offset)`` from stored batches.

    Control batches (transaction markers) are skipped. Transactional data is read committed: a
    transactional batch is dropped when the next marker of its producer inside ``batches`` is an
    ABORT, or -- when that marker lies outside the batches -- when ``aborted_transactions`` (as kept
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
        native: walk the records with the C reader (:mod:`~tabletopic.records.native`) where it
            is installed; a batch it rejects is decoded by the pure-Python loop, which names the
            fault. Off: the Python loop only (tests compare the two).

    Returns:
        The columns, plus one :class:`BatchError` per undecodable batch in the range.
    """
    out = DecodedRecords(partition)
    use_native = native and native_available()
    in_range = [
        b for b in batches if b.base_offset + b.record_count > start_offset and b.base_offset < end_offset
    ]
    headers: list[BatchHeader | RecordBatchError] = []
    for batch in in_range:
        try:
            headers.append(parse_stored_header(batch.payload))
        except RecordBatchError as exc:
            headers.append(exc)
    aborted_batches = aborted_batch_offsets(
        [
            (batch.base_offset, header, batch.payload)
            for batch, header in zip(in_range, headers, strict=True)
            if isinstance(header, BatchHeader)
        ],
        aborted_transactions,
    )
    for batch, parsed in zip(in_range, headers, strict=True):
        try:
            if isinstance(parsed, RecordBatchError):
                raise parsed
            header = parsed
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
            if not (
                use_native
                and append_records_native(
                    out, batch.payload, data, header, batch.base_offset, start_offset, end_offset
                )
            ):
                append_records(out, data, header, batch.base_offset, start_offset, end_offset)
        except RecordBatchError as exc:
            out.errors.append(BatchError(batch.base_offset, batch.record_count, str(exc)))
    return out
