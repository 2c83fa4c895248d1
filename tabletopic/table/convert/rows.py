"""Decoded Kafka records -> table rows as one ``pyarrow.RecordBatch``.

Every row carries ``_kafka_key``, ``_kafka_header`` (map<string, binary>) and ``_kafka_metadata``
struct(partition int32, offset int64, timestamp int64). The value becomes ``_kafka_value`` (binary for
raw, string for string, a struct for schema-based values) unless ``transform.value.type`` spreads it:
``flatten`` puts the value's fields at top level; ``flatten_debezium`` keeps the row image (``after``,
or ``before`` for deletes) and adds ``_cdc`` struct(op, ts, offset, source) with op I/U/D.

Records that cannot become rows are returned beside the batch as :class:`FailedRecord` with their raw
key, value and headers, so the caller can apply ``errors.tolerance`` and feed the DLQ topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.records.columns import BatchError, DecodedRecords
from tabletopic.records.decoder import StoredBatchLike, decode_records
from tabletopic.records.transactions import AbortedTransaction
from tabletopic.schema_registry.lookup import SchemaLookup
from tabletopic.table.convert.debezium import flatten_debezium
from tabletopic.table.convert.decoders import DecoderCache, Failure, decode_column
from tabletopic.table.table_config import ErrorsTolerance, TableTopicConfig, TransformType

KEY_COLUMN = "_kafka_key"
VALUE_COLUMN = "_kafka_value"
HEADER_COLUMN = "_kafka_header"
METADATA_COLUMN = "_kafka_metadata"
CDC_COLUMN = "_cdc"

HEADER_TYPE = pa.map_(pa.string(), pa.binary())
METADATA_TYPE = pa.struct(
    [pa.field("partition", pa.int32()), pa.field("offset", pa.int64()), pa.field("timestamp", pa.int64())]
)
RESERVED_COLUMNS = frozenset({KEY_COLUMN, VALUE_COLUMN, HEADER_COLUMN, METADATA_COLUMN, CDC_COLUMN})

# Headers the DLQ copy of a failed record carries, so its consumer knows what went wrong where.
DLQ_HEADER_REASON = "tabletopic.error.reason"
DLQ_HEADER_TOPIC = "tabletopic.error.topic"
DLQ_HEADER_PARTITION = "tabletopic.error.partition"
DLQ_HEADER_OFFSET = "tabletopic.error.offset"


class RecordConversionError(RuntimeError):
    """``errors.tolerance`` forbids skipping a failed record; the commit must not happen."""


@dataclass(frozen=True, slots=True)
class FailedRecord:
    partition: int
    offset: int
    timestamp: int
    reason: str
    invalid_data: bool
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]

    def dlq_headers(self, topic: str) -> list[tuple[str, bytes | None]]:
        """The original headers plus ones saying why and where the record failed."""
        return [
            *self.headers,
            (DLQ_HEADER_REASON, self.reason.encode("utf-8", "replace")),
            (DLQ_HEADER_TOPIC, topic.encode()),
            (DLQ_HEADER_PARTITION, str(self.partition).encode()),
            (DLQ_HEADER_OFFSET, str(self.offset).encode()),
        ]


@dataclass(slots=True)
class ConversionResult:
    """Rows plus what was left out. ``batch`` is None when no record produced a row."""

    batch: pa.RecordBatch | None
    failures: list[FailedRecord] = field(default_factory=list)
    batch_errors: list[BatchError] = field(default_factory=list)

    def enforce(self, tolerance: ErrorsTolerance) -> list[FailedRecord]:
        """Apply ``errors.tolerance``: raise RecordConversionError if a failure may not be skipped,
        else return the skipped records (for the DLQ and metrics).

        ``none`` skips nothing; ``invalid_data`` skips records whose bytes cannot be decoded;
        ``all`` also skips conversion failures and undecodable (corrupt) batches.
        """
        if tolerance is ErrorsTolerance.ALL:
            return list(self.failures)
        if self.batch_errors:
            e = self.batch_errors[0]
            raise RecordConversionError(
                f"batch at offset {e.base_offset} ({e.record_count} records) cannot be read: {e.reason}"
            )
        for f in self.failures:
            if tolerance is ErrorsTolerance.NONE or not f.invalid_data:
                raise RecordConversionError(
                    f"record at partition {f.partition} offset {f.offset} cannot be converted: {f.reason}"
                )
        return list(self.failures)


class RecordConverter:
    """Converts :class:`DecodedRecords` of one topic into rows. Create one per task and reuse it:
    it caches decoders per schema id."""

    def __init__(self, config: TableTopicConfig, lookup: SchemaLookup | None = None) -> None:
        self.config = config
        self._cache = DecoderCache(lookup)

    def convert(self, records: DecodedRecords) -> ConversionResult:
        n = len(records)
        failures: dict[int, Failure] = {}
        key_array, _ = decode_column(records.keys, self.config.key_converter, self._cache, failures)
        value_array, is_record = decode_column(
            records.values, self.config.value_converter, self._cache, failures
        )
        metadata = pa.StructArray.from_arrays(
            [
                pa.array([records.partition] * n, type=pa.int32()),
                pa.array(records.offsets, type=pa.int64()),
                _int64(records.timestamps),
            ],
            fields=list(METADATA_TYPE),
        )
        headers = pa.array(records.headers, type=HEADER_TYPE)

        columns: list[tuple[str, pa.Array]] = []
        drop: list[bool] | None = None
        transform = self.config.value_transform
        if transform is TransformType.FLATTEN and is_record and pa.types.is_struct(value_array.type):
            columns += _spread(value_array)
            if self.config.id_columns:
                # A tombstone has no fields to identify a row by (the id columns are required in
                # the table), so it cannot be written; it is dropped, not failed.
                drop = [v is None for v in records.values]
        elif (
            transform is TransformType.FLATTEN_DEBEZIUM and is_record and pa.types.is_struct(value_array.type)
        ):
            row, cdc, drop, bad = flatten_debezium(value_array, metadata.field("offset"))
            for i, reason in bad.items():
                failures.setdefault(i, Failure(reason, invalid_data=False))
            columns += _spread(row)
            columns.append((CDC_COLUMN, cdc))
        elif transform is not TransformType.NONE and n and len(failures) < n:
            why = f"transform {transform} needs record values, got {value_array.type}"
            for i in range(n):
                failures.setdefault(i, Failure(why, invalid_data=False))
        else:
            columns.append((VALUE_COLUMN, value_array))
        columns += [(KEY_COLUMN, key_array), (HEADER_COLUMN, headers), (METADATA_COLUMN, metadata)]
        if self.config.cdc_field is not None and n:
            _check_cdc_ops(dict(columns), self.config.cdc_field, failures, drop)

        keep = [i not in failures and not (drop is not None and drop[i]) for i in range(n)]
        batch = pa.RecordBatch.from_arrays([c for _, c in columns], names=[name for name, _ in columns])
        if not all(keep):
            batch = batch.filter(pa.array(keep, type=pa.bool_()))
        failed = [
            FailedRecord(
                records.partition,
                records.offsets[i],
                records.timestamps[i],
                f.reason,
                f.invalid_data,
                records.keys[i],
                records.values[i],
                records.headers[i],
            )
            for i, f in sorted(failures.items())
        ]
        return ConversionResult(batch if batch.num_rows else None, failed, list(records.errors))


def _int64(values: list[int]) -> pa.Array:
    """Timestamps as int64; a corrupt delta can push one past 64 bits, which wraps as Java's long
    arithmetic (Kafka's own reader) does instead of failing the whole batch."""
    try:
        return pa.array(values, type=pa.int64())
    except OverflowError:
        return pa.array([((v + (1 << 63)) % (1 << 64)) - (1 << 63) for v in values], type=pa.int64())


def _check_cdc_ops(
    columns: dict[str, pa.Array], path: str, failures: dict[int, Failure], drop: list[bool] | None
) -> None:
    """Every row written must carry an I, U or D in the ``cdc.field`` column (possibly nested)."""
    head, *rest = path.split(".")
    array = columns.get(head)
    for name in rest:
        if array is None or not pa.types.is_struct(array.type) or array.type.get_field_index(name) < 0:
            array = None
            break
        array = pc.struct_field(array, name)
    if array is None:
        for i in range(len(next(iter(columns.values())))):
            failures.setdefault(
                i, Failure(f"cdc.field column {path!r} is not in the record", invalid_data=False)
            )
        return
    for i, op in enumerate(array.to_pylist()):
        if i in failures or (drop is not None and drop[i]):
            continue
        if op not in _CDC_OPS:
            failures[i] = Failure(f"cdc.field {path} is {op!r}, expected I, U or D")


_CDC_OPS = frozenset({"I", "U", "D"})


def _spread(struct_array: pa.Array) -> list[tuple[str, pa.Array]]:
    """A struct column's fields as top-level columns (a null struct gives nulls in every field)."""
    children = struct_array.flatten() if struct_array.type.num_fields else []
    out = []
    for i, child in enumerate(children):
        name = struct_array.type.field(i).name
        if name in RESERVED_COLUMNS:
            # A value field may not shadow the metadata columns; keep it under a suffixed name.
            name = f"{name}_value"
        out.append((name, child))
    return out


def convert_records(
    records: DecodedRecords, config: TableTopicConfig, lookup: SchemaLookup | None = None
) -> ConversionResult:
    """One-shot form of :meth:`RecordConverter.convert` (builds a fresh decoder cache)."""
    return RecordConverter(config, lookup).convert(records)


def convert_slice(
    batches: Iterable[StoredBatchLike],
    start_offset: int,
    end_offset: int,
    partition: int,
    converter: RecordConverter,
    aborted_transactions: Sequence[AbortedTransaction] = (),
) -> ConversionResult:
    """Decode stored batches and convert the records in ``[start_offset, end_offset)`` to rows —
    what a Spark task does for each work item before yielding ``result.batch``."""
    decoded = decode_records(batches, start_offset, end_offset, partition, aborted_transactions)
    return converter.convert(decoded)
