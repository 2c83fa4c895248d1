"""``tables rebuild``: rebuild a table topic's table from the topic on a branch of the table and
swap it in atomically while the live pipeline keeps committing; ``--adopt`` takes over an existing
Iceberg table instead.

The rebuild writes to the branch :data:`REBUILD_BRANCH` of the table itself, so its data files share
the table's schema and field ids. Every round reads the next records with a Kafka consumer, converts
them as the pipeline does, and commits them to the branch with the branch's own committed offsets
in the snapshot summary (plus the start it was asked for, :data:`REBUILD_FROM_PROPERTY`): a rebuild
killed at any point resumes from the branch. Once a round finds nothing new, one catalog commit
points ``main`` at the branch head and drops the branch, conditional on ``main`` being where it was
read a moment before. The swap is correct whatever the live pipeline committed meanwhile: the branch
head is a consistent pair of rows and offsets, and the pipeline's commits are conditional on the
snapshot they planned at, so an in-flight one re-plans from the branch's offsets; records it had
committed past those offsets are ingested again, once.

Upsert and CDC tables hold one row per key, so a round's rows cannot simply be appended: every round
is reduced, together with the rows kept so far, to the latest change of each key (the upsert
commit's own rule, :func:`~tabletopic.table.row_delta.latest_per_key`), and the branch gets one
commit at the end with the keys whose latest change is not a delete. The rows kept in between are
one per key, held in the command's memory; a rebuild killed before that commit starts over.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import BadRequestError, CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import AssertRefSnapshotId, RemoveSnapshotRefUpdate, SetSnapshotRefUpdate

from tabletopic.crashpoints import crash_point
from tabletopic.table import tables
from tabletopic.table.commit import (
    EPOCH_PROPERTY,
    OFFSETS_PROPERTY,
    TOPIC_ID_PROPERTY,
    CommittedState,
    StalePlan,
    commit_data_files,
    committed_state,
    encode_offsets,
    new_transaction,
)
from tabletopic.table.convert.rows import RecordConverter
from tabletopic.table.convert.unify import SchemaConflict, conform_batch, unify_schemas
from tabletopic.table.ops.topic_read import open_consumer
from tabletopic.table.table_config import TableTopicConfig

log = logging.getLogger(__name__)

REBUILD_BRANCH = "tabletopic-rebuild"
REBUILD_FROM_PROPERTY = "tabletopic.rebuild-from"
SWAP_ATTEMPTS = 20
COMMIT_ATTEMPTS = 20


class RebuildError(Exception):
    """The table cannot be rebuilt or adopted as asked."""


@dataclass
class RebuildResult:
    rows: int = 0
    rounds: int = 0
    resumed: bool = False
    offsets: dict[int, int] = field(default_factory=dict)
    snapshot_id: int | None = None


def start_offsets(
    bootstrap: str, topic: str, from_offset: int | None, from_timestamp_ms: int | None
) -> dict[int, int]:
    """Where the rebuild starts in every partition: ``from_offset`` (clamped to the log), the first
    offset at or after ``from_timestamp_ms``, or the log start."""
    from confluent_kafka import TopicPartition

    from tabletopic.table.ops.topic_read import partitions_of

    consumer = open_consumer(bootstrap)
    try:
        starts: dict[int, int] = {}
        for partition in partitions_of(bootstrap, topic):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if from_timestamp_ms is not None:
                (found,) = consumer.offsets_for_times(
                    [TopicPartition(topic, partition, from_timestamp_ms)], 10
                )
                starts[partition] = high if found.offset < 0 else max(found.offset, low)
            elif from_offset is not None:
                starts[partition] = min(max(from_offset, low), high)
            else:
                starts[partition] = low
        return starts
    finally:
        consumer.close()


def _branch_head(table: Table) -> Snapshot | None:
    return table.metadata.snapshot_by_name(REBUILD_BRANCH)


def _branch_state(table: Table) -> tuple[Snapshot | None, dict[int, int], str | None]:
    head = _branch_head(table)
    if head is None:
        return None, {}, None
    props = head.summary.additional_properties if head.summary else {}
    offsets = {int(p): int(o) for p, o in json.loads(props.get(OFFSETS_PROPERTY, "{}")).items()}
    return head, offsets, props.get(REBUILD_FROM_PROPERTY)


def _read_round(
    bootstrap: str, topic: str, start: dict[int, int], ends: dict[int, int], max_records: int
) -> Iterator[tuple[int, int, Any]]:
    """``(partition, offset, message)`` of at most ``max_records`` records in ``[start, ends)``."""
    from confluent_kafka import KafkaError, TopicPartition

    pending = {p: end for p, end in ends.items() if end > start.get(p, 0)}
    if not pending:
        return
    consumer = open_consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, start.get(p, 0)) for p in pending])
        taken = idle = 0
        while pending and taken < max_records:
            messages = consumer.consume(min(5000, max_records - taken), 0.5)
            idle = 0 if messages else idle + 1
            if idle > 30:
                raise RebuildError(f"reading {topic}: no progress for 15s (is the node up?)")
            for msg in messages:
                p = msg.partition()
                err = msg.error()
                if p not in pending:
                    continue
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.pop(p, None)
                    continue
                if msg.offset() >= pending[p] or taken >= max_records:
                    pending.pop(p, None)
                    continue
                taken += 1
                yield p, msg.offset(), msg
                if msg.offset() + 1 >= pending.get(p, 0):
                    pending.pop(p, None)
    finally:
        consumer.close()


def _to_rows(
    messages: list[tuple[int, int, Any]], converter: RecordConverter
) -> tuple[list[pa.RecordBatch], dict[int, int]]:
    """Convert messages with the pipeline's converter (:meth:`RecordConverter.convert`, what a task
    runs on the records it decoded from stored batches). The consumer has already decoded the
    batches (read committed: transaction markers and aborted records are no messages), so its
    messages become the decoded columns directly; re-encoding them as batches to decode them again
    cost five times the conversion. Returns the rows and each partition's next offset."""
    from tabletopic.records.columns import DecodedRecords

    by_partition: dict[int, DecodedRecords] = {}
    ends: dict[int, int] = {}
    for partition, offset, msg in messages:
        decoded = by_partition.get(partition)
        if decoded is None:
            decoded = by_partition[partition] = DecodedRecords(partition)
        _, stamp = msg.timestamp()
        decoded.offsets.append(offset)
        decoded.timestamps.append(stamp)
        decoded.keys.append(msg.key())
        decoded.values.append(msg.value())
        decoded.headers.append(tuple(msg.headers() or ()))
        ends[partition] = offset + 1
    batches: list[pa.RecordBatch] = []
    for partition, decoded in by_partition.items():
        result = converter.convert(decoded)
        if result.batch_errors or any(not f.invalid_data for f in result.failures):
            raise RebuildError(
                f"partition {partition}: records that cannot be converted: {result.failures[:1]}"
            )
        if result.batch is not None and result.batch.num_rows:
            batches.append(result.batch)
    return batches, ends


def _commit_round(
    table: Table, batches: list[pa.RecordBatch], offsets: dict[int, int], properties: dict[str, str]
) -> None:
    from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow

    files: list[Any] = []
    if batches:
        target = schema_to_pyarrow(table.schema(), include_field_ids=False)
        frame = pa.Table.from_batches([conform_batch(b, target) for b in batches], schema=target)
        files = list(_dataframe_to_data_files(table.metadata, df=frame, io=table.io, write_uuid=uuid.uuid4()))
    props = {
        **properties,
        OFFSETS_PROPERTY: encode_offsets(offsets),
        "tabletopic.rows": str(sum(b.num_rows for b in batches)),
    }
    for attempt in range(COMMIT_ATTEMPTS):
        transaction = new_transaction(table)
        update = transaction.update_snapshot(snapshot_properties=props, branch=REBUILD_BRANCH)
        with update.fast_append() as append:
            for data_file in files:
                append.append_data_file(data_file)
        try:
            transaction.commit_transaction()
            return
        except (CommitFailedException, BadRequestError) as exc:
            # The live pipeline commits to main meanwhile; each of its commits takes the table's next
            # sequence number, which a branch commit built on the previous metadata then reuses
            # ("cannot add snapshot with sequence number N older than last sequence number N").
            # The branch is ours alone: reload and commit the same files again.
            if attempt == COMMIT_ATTEMPTS - 1:
                raise RebuildError(f"commit to the rebuild branch kept failing: {exc}") from exc
            table = table.refresh()


def rebuild(
    bootstrap: str,
    catalog: Catalog,
    topic: str,
    config: TableTopicConfig,
    converter: RecordConverter,
    start: dict[int, int],
    topic_id: str | None = None,
    round_records: int = 200_000,
    progress: Callable[[int], None] = lambda _n: None,
) -> RebuildResult:
    """Rebuild ``topic``'s table from ``start`` on a branch, then swap it in (resuming a rebuild
    from the same start that was interrupted)."""
    from confluent_kafka import TopicPartition

    ident = tables.identifier(config, topic)
    table = catalog.load_table(ident)
    main = committed_state(table)
    wanted_from = encode_offsets(start)
    head, offsets, built_from = _branch_state(table)
    result = RebuildResult()
    if head is not None and built_from != wanted_from:
        log.info("dropping an earlier rebuild of %s from other offsets (%s)", topic, built_from)
        table.manage_snapshots().remove_branch(REBUILD_BRANCH).commit()
        head, offsets = None, {}
    result.resumed = head is not None
    offsets = dict(start) if head is None else {**start, **offsets}
    properties = {REBUILD_FROM_PROPERTY: wanted_from, EPOCH_PROPERTY: str(main.epoch)}
    fed_by = topic_id or main.topic_id
    if fed_by is not None:
        properties[TOPIC_ID_PROPERTY] = fed_by
    # The branch catches up to the high watermarks of the moment the run starts (chasing a topic
    # that keeps growing would never end); what arrives later the live pipeline ingests after the
    # swap, from the branch's offsets.
    probe = open_consumer(bootstrap)
    try:
        ends = {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in offsets}
    finally:
        probe.close()
    if config.writes_deletes:
        if head is None:
            rows = _latest_rows(
                bootstrap,
                catalog,
                ident,
                topic,
                config,
                converter,
                offsets,
                ends,
                round_records,
                progress,
                result,
            )
            table = catalog.load_table(ident)
            _commit_round(table, rows, offsets, properties)
            result.rows = sum(b.num_rows for b in rows)
        result.offsets = offsets
        result.snapshot_id = swap(catalog, ident)
        return result
    while True:
        messages = list(_read_round(bootstrap, topic, offsets, ends, round_records))
        if not messages and head is not None:
            break
        batches, reached = _to_rows(messages, converter)
        if batches:
            try:
                table = tables.table_for_batches(catalog, ident, table, batches, config)
            except SchemaConflict as exc:
                raise RebuildError(str(exc)) from exc
        offsets.update(reached)
        _commit_round(table, batches, offsets, properties)
        table = catalog.load_table(ident)
        head = _branch_head(table)
        result.rows += sum(b.num_rows for b in batches)
        result.rounds += 1
        progress(len(messages))
        crash_point("table.rebuild_round")
    result.offsets = offsets
    result.snapshot_id = swap(catalog, ident)
    return result


def _latest_rows(
    bootstrap: str,
    catalog: Catalog,
    ident: tuple[str, str],
    topic: str,
    config: TableTopicConfig,
    converter: RecordConverter,
    offsets: dict[int, int],
    ends: dict[int, int],
    round_records: int,
    progress: Callable[[int], None],
    result: RebuildResult,
) -> list[pa.RecordBatch]:
    """The rows an upsert/CDC table holds after the records from ``offsets`` to ``ends``: each key's
    latest change that is not a delete, in the table's types. Advances ``offsets`` as it reads."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN
    from tabletopic.table.row_delta import delete_mask, latest_per_key

    marker = pa.field(DELETE_MARKER_COLUMN, pa.bool_())
    table = catalog.load_table(ident)
    kept: pa.Table | None = None
    while True:
        messages = list(_read_round(bootstrap, topic, offsets, ends, round_records))
        if not messages:
            break
        batches, reached = _to_rows(messages, converter)
        offsets.update(reached)
        result.rounds += 1
        progress(len(messages))
        if not batches:
            continue
        # Batches of only deletes carry their id typed as the record key was ("7" for an integer
        # id): they take the table's types below and evolve nothing, as in the upsert commit.
        with_values = [_without_marker(b.schema) for b in batches if not _deletes_only(b)]
        if with_values:
            try:
                schema = unify_schemas(with_values)
            except SchemaConflict as exc:
                raise RebuildError(str(exc)) from exc
            tables.ensure_schema(catalog, ident, table, schema, config)
            table = catalog.load_table(ident)
        target = schema_to_pyarrow(table.schema(), include_field_ids=False).append(marker)
        held = [] if kept is None else kept.to_batches()
        fresh = [_with_marker(b) for b in batches]
        rows = pa.Table.from_batches([conform_batch(b, target) for b in [*held, *fresh]], schema=target)
        kept = latest_per_key(rows, tables.merge_keys(config, table))
    if kept is None or not kept.num_rows:
        return []
    live = kept.filter(pc.invert(delete_mask(kept, tables.delete_column(config))))
    out: list[pa.RecordBatch] = live.drop_columns([DELETE_MARKER_COLUMN]).combine_chunks().to_batches()
    return out


def _without_marker(schema: pa.Schema) -> pa.Schema:
    from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN

    index = schema.get_field_index(DELETE_MARKER_COLUMN)
    return (schema if index < 0 else schema.remove(index)).remove_metadata()


def _deletes_only(batch: pa.RecordBatch) -> bool:
    from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN

    index = batch.schema.get_field_index(DELETE_MARKER_COLUMN)
    return index >= 0 and bool(pc.all(batch.column(index)).as_py())


def _with_marker(batch: pa.RecordBatch) -> pa.RecordBatch:
    from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN

    if batch.schema.get_field_index(DELETE_MARKER_COLUMN) >= 0:
        return batch
    return batch.append_column(DELETE_MARKER_COLUMN, pa.array([False] * batch.num_rows, pa.bool_()))


def swap(catalog: Catalog, ident: tuple[str, str]) -> int:
    """Point ``main`` at the rebuild branch's head and drop the branch, in one conditional commit."""
    for _ in range(SWAP_ATTEMPTS):
        table = catalog.load_table(ident)
        head = _branch_head(table)
        if head is None:
            raise RebuildError(f"{'.'.join(ident)} has no rebuild branch to swap in")
        crash_point("table.rebuild_before_swap")
        try:
            catalog.commit_table(
                table,
                requirements=(
                    AssertRefSnapshotId.model_validate(
                        {"ref": MAIN_BRANCH, "snapshot-id": table.metadata.current_snapshot_id}
                    ),
                    AssertRefSnapshotId.model_validate(
                        {"ref": REBUILD_BRANCH, "snapshot-id": head.snapshot_id}
                    ),
                ),
                updates=(
                    SetSnapshotRefUpdate.model_validate(
                        {
                            "ref-name": MAIN_BRANCH,
                            "type": SnapshotRefType.BRANCH,
                            "snapshot-id": head.snapshot_id,
                        }
                    ),
                    RemoveSnapshotRefUpdate.model_validate({"ref-name": REBUILD_BRANCH}),
                ),
            )
        except CommitFailedException as exc:
            log.info("swap of %s retried: main moved (%s)", ".".join(ident), exc)
            continue
        crash_point("table.rebuild_after_swap")
        return head.snapshot_id
    raise RebuildError(f"main of {'.'.join(ident)} kept moving: {SWAP_ATTEMPTS} swap attempts failed")


def adopt(
    catalog: Catalog, topic: str, config: TableTopicConfig, start: dict[int, int], topic_id: str
) -> int:
    """Make an existing Iceberg table ``topic``'s table, keeping its rows: an empty commit that says
    the table holds the topic up to ``start`` (the pipeline ingests from there and evolves the
    schema to hold the topic's columns).

    Raises:
        RebuildError: the table already holds committed offsets of a topic.
    """
    ident = tables.identifier(config, topic)
    table = catalog.load_table(ident)
    state = committed_state(table)
    if state.offsets:
        raise RebuildError(
            f"{'.'.join(ident)} already holds offsets of a topic ({state.topic_id}); use rebuild instead"
        )
    try:
        return commit_data_files(
            table, [], start, CommittedState(state.snapshot_id), 0, topic_id, {"tabletopic.adopted": "true"}
        )
    except StalePlan as exc:
        raise RebuildError(f"{'.'.join(ident)} changed while adopting it; run again ({exc})") from exc
