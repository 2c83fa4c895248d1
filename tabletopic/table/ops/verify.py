"""``tables verify``: prove that a table holds every record of its topic up to the committed offsets
exactly once, or say by partition and offset range where it does not.

Three inputs, each reduced to offset ranges so the comparison costs nothing however big the table:

- the topic (:class:`TopicCoverage`): the offsets of the data records a read-committed Kafka
  consumer sees in ``[log start, committed offset)`` — control markers and aborted transactions
  occupy offsets but are never rows;
- the dead-letter topic: records skipped under ``errors.tolerance`` are expected *not* to be rows;
- the table (:class:`TableCoverage`) at the snapshot whose offsets are checked: the offset ranges
  its rows cover and the ranges present more than once. pyiceberg computes it for small tables,
  Spark for big ones (:mod:`tabletopic.spark.verify`).

An upsert or CDC table holds one row per key, the key's latest change, so there the records
expected as rows are not all of them: the topic's records are converted as the pipeline converts
them and reduced to the latest change of every key (:func:`latest_row_offsets`, the upsert commit's
own rule), deletes dropped. The table must then hold exactly the rows of those offsets: a row of an
older change of its key shows as unexpected, a key's latest row that is absent as missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from tabletopic.table.ops import ranges as R
from tabletopic.table.ops.progress import VerifyProgress
from tabletopic.table.ops.ranges import Range
from tabletopic.table.table_config import TableTopicConfig


@dataclass
class TableCoverage:
    """Which offsets of one partition the table's rows cover."""

    rows: int = 0
    present: list[Range] = field(default_factory=list)  # distinct offsets with at least one row
    duplicates: list[tuple[int, int, int]] = field(default_factory=list)  # (start, end, copies)

    @property
    def duplicate_rows(self) -> int:
        return sum((end - start) * (copies - 1) for start, end, copies in self.duplicates)


@dataclass
class PartitionReport:
    partition: int
    log_start: int
    committed: int
    expected: int  # data records the topic holds in [log start, committed)
    rows: int
    skipped: int  # records sent to the dead-letter topic instead of the table
    missing: list[Range] = field(default_factory=list)
    duplicates: list[tuple[int, int, int]] = field(default_factory=list)
    unexpected: list[Range] = field(default_factory=list)  # rows at offsets that are no record
    below_log_start: int = 0  # rows of records retention already removed: not checkable
    topic_incomplete: bool = False

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicates or self.unexpected or self.topic_incomplete)

    def as_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "log_start": self.log_start,
            "committed": self.committed,
            "expected": self.expected,
            "rows": self.rows,
            "skipped": self.skipped,
            "missing": [list(r) for r in self.missing],
            "missing_records": R.count(self.missing),
            "duplicates": [list(d) for d in self.duplicates],
            "duplicate_rows": sum((e - s) * (c - 1) for s, e, c in self.duplicates),
            "unexpected": [list(r) for r in self.unexpected],
            "unexpected_rows": R.count(self.unexpected),
            "below_log_start": self.below_log_start,
            "topic_incomplete": self.topic_incomplete,
            "ok": self.ok,
        }


@dataclass
class VerifyReport:
    topic: str
    table: str
    snapshot_id: int | None
    partitions: list[PartitionReport]
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "table": self.table,
            "snapshot_id": self.snapshot_id,
            "ok": self.ok,
            "partitions": [p.as_dict() for p in self.partitions],
            "notes": list(self.notes),
        }


def coverage_from_offsets(offsets: np.ndarray) -> TableCoverage:
    """Coverage of one partition from its rows' offsets (any order, repeats kept)."""
    if offsets.size == 0:
        return TableCoverage()
    values, counts = np.unique(offsets, return_counts=True)
    duplicates: list[tuple[int, int, int]] = []
    repeated = counts > 1
    for copies in np.unique(counts[repeated]):
        for start, end in R.from_sorted_unique(values[counts == copies]):
            duplicates.append((start, end, int(copies)))
    return TableCoverage(
        rows=int(offsets.size), present=R.from_sorted_unique(values), duplicates=sorted(duplicates)
    )


def coverage_from_batches(batches: Iterable[pa.RecordBatch | pa.Table]) -> dict[int, TableCoverage]:
    """Coverage of every partition from Arrow batches holding a ``_kafka_metadata`` struct column
    (or flat ``partition``/``offset`` columns)."""
    parts: dict[int, list[np.ndarray]] = {}
    for batch in batches:
        if "_kafka_metadata" in batch.schema.names:
            meta = batch.column("_kafka_metadata")
            partitions, offsets = pc.struct_field(meta, "partition"), pc.struct_field(meta, "offset")
        else:
            partitions, offsets = batch.column("partition"), batch.column("offset")
        p_np = np.asarray(partitions.to_numpy(zero_copy_only=False), dtype=np.int64)
        o_np = np.asarray(offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        for partition in np.unique(p_np):
            parts.setdefault(int(partition), []).append(o_np[p_np == partition])
    return {p: coverage_from_offsets(np.concatenate(chunks)) for p, chunks in parts.items()}


def compare(
    topic: str,
    table: str,
    snapshot_id: int | None,
    committed: Mapping[int, int],
    log_starts: Mapping[int, int],
    topic_records: Mapping[int, list[Range]],
    skipped: Mapping[int, list[Range]],
    coverage: Mapping[int, TableCoverage],
    incomplete: Iterable[int] = (),
) -> VerifyReport:
    """Compare what the topic holds up to the committed offsets with what the table holds.

    Args:
        committed: next offset per partition, from the snapshot being checked.
        log_starts: each partition's first offset still in the topic.
        topic_records: offset ranges of the data records read from the topic below ``committed``.
        skipped: offset ranges of records the dead-letter topic holds (expected not to be rows).
        coverage: the table's rows per partition.
        incomplete: partitions whose topic read stopped early (timed out).
    """
    stopped = set(incomplete)
    reports: list[PartitionReport] = []
    for partition in sorted(set(committed) | set(coverage)):
        end = committed.get(partition, 0)
        start = min(log_starts.get(partition, 0), end)
        cov = coverage.get(partition, TableCoverage())
        records = R.intersect(R.normalize(topic_records.get(partition, [])), [(start, end)])
        dead = R.intersect(R.normalize(skipped.get(partition, [])), records)
        expected = R.subtract(records, dead)
        checkable = R.intersect(cov.present, [(start, 1 << 62)])
        below = R.count(R.intersect(cov.present, [(0, start)]))
        reports.append(
            PartitionReport(
                partition=partition,
                log_start=start,
                committed=end,
                expected=R.count(expected),
                rows=cov.rows,
                skipped=R.count(dead),
                missing=R.subtract(expected, cov.present),
                duplicates=list(cov.duplicates),
                unexpected=R.subtract(checkable, expected),
                below_log_start=below,
                topic_incomplete=partition in stopped,
            )
        )
    return VerifyReport(topic, table, snapshot_id, reports)


def latest_row_offsets(
    rows: pa.Table, id_columns: tuple[str, ...], delete_column: str | None
) -> dict[int, list[Range]]:
    """The offsets, by partition, of the rows an upsert/CDC table must hold after ``rows`` (the
    topic's records converted, with the delete marker): the latest change of every key that is not
    a delete, ranked as :func:`tabletopic.table.row_delta.latest_per_key` ranks them."""
    from tabletopic.table.row_delta import delete_mask, latest_per_key

    latest = latest_per_key(rows, id_columns)
    kept = latest.filter(pc.invert(delete_mask(latest, delete_column)))
    coverage = coverage_from_batches([kept.select(["_kafka_metadata"])])
    return {partition: cov.present for partition, cov in coverage.items()}


def _expected_upsert_rows(
    bootstrap: str,
    table: Table,
    target: VerifyTarget,
    converter: Any,
    committed: Mapping[int, int],
    skipped: Mapping[int, list[Range]],
) -> dict[int, list[Range]]:
    """Read ``target``'s records below ``committed``, convert them and keep each key's latest
    (records sent to the dead-letter topic never changed the table, so they are left out). Holds the
    converted records in memory: one row per record of the topic's retained log."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from tabletopic.table import tables
    from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN
    from tabletopic.table.convert.unify import conform_batch
    from tabletopic.table.ops.rebuild import RebuildError, _read_round, _to_rows

    assert target.config is not None
    try:
        messages = list(_read_round(bootstrap, target.topic, {}, dict(committed), 1 << 62))
        batches, _ = _to_rows(messages, converter)
    except RebuildError as exc:
        raise ValueError(str(exc)) from exc
    # The table's own types: a tombstone's id typed as its key ("7") is cast as the commit casts it.
    schema = schema_to_pyarrow(table.schema(), include_field_ids=False)
    marked = schema.append(pa.field(DELETE_MARKER_COLUMN, pa.bool_()))
    conformed = []
    for batch in batches:
        if batch.schema.get_field_index(DELETE_MARKER_COLUMN) < 0:
            batch = batch.append_column(DELETE_MARKER_COLUMN, pa.array([False] * batch.num_rows))
        conformed.append(conform_batch(batch, marked))
    rows = pa.Table.from_batches(conformed, schema=marked)
    if rows.num_rows:
        meta = rows.column("_kafka_metadata")
        partitions = pc.struct_field(meta, "partition").to_numpy(zero_copy_only=False)
        offsets = pc.struct_field(meta, "offset").to_numpy(zero_copy_only=False)
        dead = np.zeros(rows.num_rows, dtype=bool)
        for partition, ranges in skipped.items():
            for start, end in ranges:
                dead |= (partitions == partition) & (offsets >= start) & (offsets < end)
        rows = rows.filter(pa.array(~dead))
    keys = tables.merge_keys(target.config, table)
    return latest_row_offsets(rows, keys, tables.delete_column(target.config))


# ------------------------------------------------------------------------------------ the run


CoverageEngine = Callable[[Table, int | None, Callable[[int], None]], dict[int, TableCoverage]]


def pyiceberg_coverage(
    table: Table, snapshot_id: int | None, progress: Callable[[int], None]
) -> dict[int, TableCoverage]:
    """Coverage from a pyiceberg scan of only the partition and offset columns (small tables)."""
    if snapshot_id is None:
        return {}
    scan = table.scan(
        selected_fields=("_kafka_metadata.partition", "_kafka_metadata.offset"), snapshot_id=snapshot_id
    )

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in scan.to_arrow_batch_reader():
            progress(batch.num_rows)
            yield batch

    return coverage_from_batches(batches())


@dataclass(frozen=True)
class VerifyTarget:
    """The topic and its table as the topic's configs name it."""

    topic: str
    identifier: tuple[str, str]
    dlq_topic: str | None
    writes_deletes: bool
    config: TableTopicConfig | None = None  # what an upsert/CDC table's keys and deletes are


def target_of(bootstrap: str, topic: str) -> VerifyTarget:
    from tabletopic.table import tables
    from tabletopic.table.ops.topic_read import table_topic_config

    config = table_topic_config(bootstrap, topic)
    return VerifyTarget(
        topic, tables.identifier(config, topic), config.dlq_topic, config.writes_deletes, config
    )


def verify(
    bootstrap: str,
    catalog: Catalog,
    target: VerifyTarget,
    coverage_engine: CoverageEngine,
    progress: VerifyProgress | None = None,
    converter: Any = None,
) -> VerifyReport:
    """Check ``target``'s table against its topic at the table's current snapshot. An upsert/CDC
    table is checked against the latest change of every key, which needs ``converter`` (a
    :class:`~tabletopic.table.convert.rows.RecordConverter` for the topic's configs).

    Raises:
        LookupError: the table does not exist.
        ValueError: an upsert/CDC table without a converter, or whose records cannot be converted.
    """
    from pyiceberg.exceptions import NoSuchTableError

    from tabletopic.table.commit import committed_state
    from tabletopic.table.ops.status import live_rows
    from tabletopic.table.ops.topic_read import dead_lettered, partitions_of, read_offsets

    if target.writes_deletes and (converter is None or target.config is None):
        raise ValueError(
            f"{target.topic} is an upsert/CDC table topic: its rows are checked against each key's latest "
            "record, which needs the topic's records converted (a converter)"
        )
    try:
        table = catalog.load_table(target.identifier)
    except NoSuchTableError as exc:
        name = ".".join(target.identifier)
        raise LookupError(f"table {name} of {target.topic} does not exist yet") from exc
    state = committed_state(table)
    committed = {p: state.offsets.get(p, 0) for p in partitions_of(bootstrap, target.topic)}
    committed.update(state.offsets)
    progress = progress or VerifyProgress()
    progress.start_topic(sum(committed.values()))
    offsets = read_offsets(bootstrap, target.topic, committed, progress.topic)
    skipped: dict[int, list[Range]] = {}
    notes: list[str] = []
    if target.dlq_topic:
        from tabletopic.table.ops.redrive import replayed_offsets

        # Dead letters already redriven are rows again; only the others are expected missing.
        replayed = replayed_offsets(table, target.dlq_topic)
        for partition, found in dead_lettered(
            bootstrap, target.dlq_topic, target.topic, start=replayed
        ).items():
            skipped[partition] = R.from_offsets(found)
    records = offsets.records
    if target.writes_deletes:
        # One row per key: the expected rows are the offsets of each key's latest change.
        records = _expected_upsert_rows(bootstrap, table, target, converter, committed, skipped)
        skipped = {}
    progress.start_table(live_rows(table.metadata.current_snapshot()))
    coverage = coverage_engine(table, state.snapshot_id, progress.table)
    report = compare(
        target.topic,
        ".".join(target.identifier),
        state.snapshot_id,
        committed,
        offsets.log_starts,
        records,
        skipped,
        coverage,
        offsets.incomplete,
    )
    if state.topic_id is not None:
        notes.append(f"table fed by topic id {state.topic_id}")
    report.notes = notes
    return report
