"""Decoded Kafka records -> table rows as one ``pyarrow.RecordBatch``.

Every row carries ``_kafka_key``, ``_kafka_header`` (map<string, binary>) and ``_kafka_metadata``
struct(partition int32, offset int64, timestamp int64). The value becomes ``_kafka_value`` (binary for
raw, string for string, a struct for schema-based values) unless ``transform.value.type`` spreads it:
``flatten`` puts the value's fields at top level; ``flatten_debezium`` keeps the row image (``after``,
or ``before`` for deletes) and adds ``_cdc`` struct(op, ts, offset, source) with op I/U/D.

Records that cannot become rows are returned beside the batch as :class:`FailedRecord` with their raw
key, value and headers, so the caller can apply ``errors.tolerance`` and feed the DLQ topic.

Tombstones (a null value) follow Kafka's compacted-topic convention: on an upsert or CDC table each
becomes a delete of its key's row, with or without a transform (the id columns are read from the
record key; the row carries :data:`DELETE_MARKER_COLUMN`, which the upsert commit reads and the table
never holds); on an append table with a transform it is left out and counted in
:attr:`ConversionResult.tombstones`. An append table without a transform keeps the row with its null
``_kafka_value``, as the log has it.
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
# Staged upsert/CDC rows only: true for a tombstone's delete. Never a table column (the ingest task
# strips it before any schema check and the upsert commit reads it).
DELETE_MARKER_COLUMN = "__tabletopic_delete"

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
    # Tombstones left out of an append table (or on an upsert table, without a key to delete by).
    tombstones: int = 0

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

    def __init__(
        self, config: TableTopicConfig, lookup: SchemaLookup | None = None, native: bool = True
    ) -> None:
        self.config = config
        self._cache = DecoderCache(lookup, native)

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
        # Tombstones matter when a transform needs the value or a table applies deletes (see the
        # module docstring).
        deletes_rows = transform is not TransformType.NONE or self.config.writes_deletes
        tombstone = [v is None for v in records.values] if deletes_rows else [False] * n
        tombstones = sum(tombstone)
        if transform is TransformType.FLATTEN and is_record and pa.types.is_struct(value_array.type):
            columns += _spread(value_array)
        elif (
            transform is TransformType.FLATTEN_DEBEZIUM and is_record and pa.types.is_struct(value_array.type)
        ):
            row, cdc, drop, bad = flatten_debezium(value_array, metadata.field("offset"))
            for i, reason in bad.items():
                failures.setdefault(i, Failure(reason, invalid_data=False))
            columns += _spread(row)
            columns.append((CDC_COLUMN, cdc))
        elif transform is not TransformType.NONE and n - tombstones and len(failures) < n:
            why = f"transform {transform} needs record values, got {value_array.type}"
            for i in range(n):
                if not tombstone[i]:
                    failures.setdefault(i, Failure(why, invalid_data=False))
        else:
            columns.append((VALUE_COLUMN, value_array))
        if transform is not TransformType.NONE:
            columns = [(name, c) for name, c in columns if name != VALUE_COLUMN]
        columns += [(KEY_COLUMN, key_array), (HEADER_COLUMN, headers), (METADATA_COLUMN, metadata)]
        deletes = [False] * n
        if tombstones:
            drop = list(drop) if drop is not None else [False] * n
            if self.config.writes_deletes:
                deletes, unkeyed = _tombstone_deletes(
                    columns, tombstone, records.keys, self._merge_ids(), failures
                )
                tombstones = unkeyed
            for i in range(n):
                if tombstone[i]:
                    drop[i] = not deletes[i]  # flatten_debezium drops null envelopes; deletes stay
        if self.config.cdc_field is not None and n:
            # A tombstone's delete has no operation column of its own: the marker says delete.
            unchecked = [deletes[i] or (drop is not None and drop[i]) for i in range(n)]
            _check_cdc_ops(dict(columns), self.config.cdc_field, failures, unchecked)
        if any(deletes):
            columns.append((DELETE_MARKER_COLUMN, pa.array(deletes, type=pa.bool_())))

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
        return ConversionResult(batch if batch.num_rows else None, failed, list(records.errors), tombstones)

    def _merge_ids(self) -> tuple[str, ...]:
        """The id columns a tombstone's delete must carry (``[_from_debezium_key_]`` matches on the
        key column itself, which every row has)."""
        if self.config.id_columns_from_debezium_key:
            return ()
        return self.config.id_columns


def _tombstone_deletes(
    columns: list[tuple[str, pa.Array]],
    tombstone: list[bool],
    keys: Sequence[bytes | None],
    id_columns: Sequence[str],
    failures: dict[int, Failure],
) -> tuple[list[bool], int]:
    """Turn keyed tombstones into delete rows: fill the id columns (in ``columns``, in place) from
    the record key. A struct key gives the id columns by field name; any other key is the value of
    the single id column. Returns which rows are deletes and how many tombstones had no key.

    A key that cannot give the id columns (wrong fields, a value that does not fit the column's
    type) fails its record: the delete it asked for cannot be applied.
    """
    n = len(tombstone)
    deletes = [tombstone[i] and keys[i] is not None for i in range(n)]
    unkeyed = sum(tombstone) - sum(deletes)
    if not any(deletes):
        return deletes, unkeyed
    by_name = dict(columns)
    key_array = by_name[KEY_COLUMN]
    mask = pa.array(deletes, type=pa.bool_())
    for path in id_columns:
        root = path.split(".", 1)[0]
        if root in RESERVED_COLUMNS:
            continue  # the id is in a column every row has (the key, the metadata)
        source = _key_part(key_array, path, len(id_columns))
        if source is None or "." in path:
            why = f"tombstone key ({key_array.type}) does not give id column {path!r}"
            for i in range(n):
                if deletes[i]:
                    failures.setdefault(i, Failure(why))
                    deletes[i] = False
            return deletes, unkeyed
        existing = by_name.get(root)
        target = (
            existing.type if existing is not None and not pa.types.is_null(existing.type) else source.type
        )
        values = _cast_rows(source, target, deletes, failures, path)
        merged = values if existing is None else pc.if_else(mask, values, existing.cast(target))
        if existing is None:
            columns.insert(0, (root, merged))
        else:
            columns[[name for name, _ in columns].index(root)] = (root, merged)
        by_name[root] = merged
    return deletes, unkeyed


def _key_part(key_array: pa.Array, path: str, id_count: int) -> pa.Array | None:
    """The key's values for id column ``path``: a struct key's field of that name (or the last
    name of a dotted path), or the whole key when it is not a record and there is one id column."""
    if pa.types.is_struct(key_array.type):
        for name in (path, path.rsplit(".", 1)[-1]):
            if key_array.type.get_field_index(name) >= 0:
                return pc.struct_field(key_array, name)
        return None
    if id_count == 1 and not pa.types.is_null(key_array.type):
        return key_array
    return None


def _cast_rows(
    source: pa.Array, target: pa.DataType, rows: list[bool], failures: dict[int, Failure], path: str
) -> pa.Array:
    """``source`` cast to ``target`` where ``rows`` is set (null elsewhere); a value that does not
    fit fails its record and clears its ``rows`` entry."""
    picked = pc.if_else(pa.array(rows, type=pa.bool_()), source, pa.nulls(len(source), source.type))
    try:
        return picked.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = []
        for i, value in enumerate(picked):
            try:
                values.append(value.cast(target) if value.is_valid else None)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                failures.setdefault(i, Failure(f"tombstone key does not fit id column {path!r}: {exc}"))
                rows[i] = False
                values.append(None)
        return pa.array([v.as_py() if v is not None else None for v in values], type=target)


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
    """Every row written must carry an I, U or D in the ``cdc.field`` column (possibly nested).

    Rows in ``drop`` (tombstones: their delete needs no operation) are exempt, also when the column
    is missing altogether: a batch of only tombstones has no value columns at all, and failing it
    stopped a CDC table on its first cycle without a change record."""
    head, *rest = path.split(".")
    array = columns.get(head)
    for name in rest:
        if array is None or not pa.types.is_struct(array.type) or array.type.get_field_index(name) < 0:
            array = None
            break
        array = pc.struct_field(array, name)
    if array is None:
        for i in range(len(next(iter(columns.values())))):
            if drop is not None and drop[i]:
                continue
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
