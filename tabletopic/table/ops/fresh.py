"""Fresh reads: a table topic's table as its next commit will leave it, read now.

The committed snapshot holds the topic up to the offsets in its summary; the records above them are
still in the log. A fresh read is the snapshot's rows plus those records, read with a
read-committed Kafka consumer up to the high watermarks of the moment and converted by the
commit's converter (:meth:`~tabletopic.table.convert.rows.RecordConverter.convert`, as ``tables
rebuild`` and ``tables verify`` do), so each record is a row once: below the offsets it is in the
snapshot, above them only in the tail. On an upsert or CDC table the tail is reduced to the latest
change of every key (the upsert commit's rule), the snapshot's rows of those keys are left out, and
the tail's rows that are not deletes are added.

The rows take the table's columns: a column the tail brings that the table does not have yet appears
once the commit has evolved the schema. Records the commit would skip as invalid data
(``errors.tolerance``) are left out here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog

from tabletopic.table.convert.rows import RecordConverter
from tabletopic.table.table_config import TableTopicConfig

if TYPE_CHECKING:
    from pyiceberg.table import Table


@dataclass(frozen=True)
class FreshTail:
    """What a fresh read adds to a committed snapshot: the log's records above its offsets, as rows.

    ``rows`` are in the table's columns; on an upsert or CDC table they are the latest change of
    every key the tail touches that is not a delete, and ``replaced`` holds those keys' columns (the
    snapshot's rows of them are left out: updated or deleted). An engine composes the fresh table
    itself: the snapshot, less the rows whose key is in ``replaced``, plus ``rows``.
    """

    rows: pa.Table
    replaced: pa.Table | None  # key columns (dotted paths as names) of every key the tail changes
    keys: tuple[str, ...]  # the merge keys (dotted paths for nested fields); () for append tables
    snapshot_id: int | None  # the committed snapshot the tail continues
    committed: dict[int, int]  # its offsets: the tail starts there
    tail_ends: dict[int, int]  # the high watermarks the tail was read up to
    tail_records: int  # records read above the committed offsets


@dataclass(frozen=True)
class FreshRead:
    """A fresh read's rows, and the tail they were composed with (the snapshot it continues, where
    it starts and ends)."""

    rows: pa.Table
    tail: FreshTail


def fresh_tail(
    bootstrap: str,
    catalog: Catalog,
    topic: str,
    config: TableTopicConfig,
    converter: RecordConverter,
) -> FreshTail:
    """The records of ``topic`` above its table's committed offsets, converted.

    Raises:
        ValueError: records of the tail that cannot be converted (the commit would stop on them).
    """
    from tabletopic.table import tables

    return _tail_of(catalog.load_table(tables.identifier(config, topic)), bootstrap, topic, config, converter)


def _tail_of(
    table: Table, bootstrap: str, topic: str, config: TableTopicConfig, converter: RecordConverter
) -> FreshTail:
    """:func:`fresh_tail` of an already loaded ``table``."""
    from confluent_kafka import TopicPartition
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from tabletopic.table import tables
    from tabletopic.table.commit import committed_state
    from tabletopic.table.ops.rebuild import RebuildError, _read_round, _to_rows
    from tabletopic.table.ops.topic_read import open_consumer, partitions_of

    state = committed_state(table)
    target = schema_to_pyarrow(table.schema(), include_field_ids=False)
    probe = open_consumer(bootstrap)
    try:
        ends = {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions_of(bootstrap, topic)
        }
    finally:
        probe.close()
    start = {p: state.offsets.get(p, 0) for p in ends}
    try:
        messages = list(_read_round(bootstrap, topic, start, ends, 1 << 62))
        batches, _ = _to_rows(messages, converter)
    except RebuildError as exc:
        raise ValueError(str(exc)) from exc
    replaced: pa.Table | None = None
    keys: tuple[str, ...] = ()
    if config.writes_deletes:
        keys = tables.merge_keys(config, table)
        rows, replaced = _latest_changes(batches, target, keys, tables.delete_column(config))
    else:
        rows = pa.Table.from_batches([_conform(b, target) for b in batches], schema=target)
    return FreshTail(rows, replaced, keys, state.snapshot_id, dict(state.offsets), ends, len(messages))


def fresh_read(
    bootstrap: str,
    catalog: Catalog,
    topic: str,
    config: TableTopicConfig,
    converter: RecordConverter,
) -> FreshRead:
    """``topic``'s table with the records not yet committed, as one Arrow table (the committed
    snapshot scanned by pyiceberg, composed with :func:`fresh_tail`).

    Raises:
        ValueError: records of the tail that cannot be converted (the commit would stop on them).
    """
    from tabletopic.table import tables

    table = catalog.load_table(tables.identifier(config, topic))
    tail = _tail_of(table, bootstrap, topic, config, converter)
    target = tail.rows.schema
    base = table.scan(snapshot_id=tail.snapshot_id).to_arrow() if tail.snapshot_id else target.empty_table()
    base = pa.Table.from_batches([_conform(b, target) for b in base.to_batches()], schema=target)
    if tail.replaced is not None:
        base = _without_keys(base, tail.replaced, tail.keys)
    return FreshRead(pa.concat_tables([base, tail.rows]), tail)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    from tabletopic.table.convert.unify import conform_batch

    return conform_batch(batch, schema)


def _without_keys(base: pa.Table, replaced: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """``base`` less its rows whose key is one of ``replaced``'s."""
    from tabletopic.table.key_index import composite, key_arrays

    if not replaced.num_rows:
        return base
    gone = pc.is_in(composite(key_arrays(base, keys)), value_set=composite(key_arrays(replaced, keys)))
    return base.filter(pc.invert(pc.fill_null(gone, False)))


def _upsert(
    base: pa.Table,
    batches: list[pa.RecordBatch],
    target: pa.Schema,
    keys: tuple[str, ...],
    delete_column: str | None,
) -> pa.Table:
    """``base`` with the tail's latest change of every key applied (deletes remove the key)."""
    if not batches:
        return base
    live, replaced = _latest_changes(batches, target, keys, delete_column)
    return pa.concat_tables([_without_keys(base, replaced, keys), live])


def _latest_changes(
    batches: list[pa.RecordBatch],
    target: pa.Schema,
    keys: tuple[str, ...],
    delete_column: str | None,
) -> tuple[pa.Table, pa.Table]:
    """The tail's latest change of every key: the rows that are not deletes, and every changed
    key's columns (the upsert commit's rule)."""
    from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN
    from tabletopic.table.row_delta import delete_mask, latest_per_key

    marked = target.append(pa.field(DELETE_MARKER_COLUMN, pa.bool_()))
    fitted = []
    for batch in batches:
        if batch.schema.get_field_index(DELETE_MARKER_COLUMN) < 0:
            batch = batch.append_column(DELETE_MARKER_COLUMN, pa.array([False] * batch.num_rows, pa.bool_()))
        fitted.append(_conform(batch, marked))
    tail = latest_per_key(pa.Table.from_batches(fitted, schema=marked), keys)
    live = tail.filter(pc.invert(delete_mask(tail, delete_column))).drop_columns([DELETE_MARKER_COLUMN])
    return live.cast(target), tail.drop_columns([DELETE_MARKER_COLUMN]).cast(target)


def table_topics(bootstrap: str) -> Mapping[tuple[str, str], tuple[str, TableTopicConfig]]:
    """Every table topic of the cluster by the table it writes: ``(namespace, table) -> (topic,
    config)`` (how a query's table names find the topic whose tail a fresh read adds)."""
    from confluent_kafka.admin import AdminClient

    from tabletopic.table import tables
    from tabletopic.table.ops.topic_read import topic_configs

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    names = [t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")]
    found: dict[tuple[str, str], tuple[str, TableTopicConfig]] = {}
    for name in names:
        config = TableTopicConfig.from_topic_configs(topic_configs(bootstrap, name), topic=name)
        if config.enabled:
            found[tables.identifier(config, name)] = (name, config)
    return found
