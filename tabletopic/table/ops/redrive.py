"""``tables redrive``: replay a table topic's dead letters into its table once their cause is fixed
(a schema registered, a converter setting corrected), exactly once.

The dead-letter topic is read from the offsets already replayed (kept in the table's snapshot
summary, :data:`~tabletopic.table.ops.status.DLQ_OFFSETS_PROPERTY`, beside the main offsets); its
records of this topic are converted exactly as the pipeline converts records (their original
partition and offset go to ``_kafka_metadata``, so ``tables verify`` finds them where they belong),
written as data files, and committed in one conditional commit that also advances the replayed DLQ
offsets. The commit is conditional on the snapshot it planned at, like the pipeline's: a concurrent
ingest commit turns it into a re-plan, a crash before it leaves the table untouched, and a crash
after it is invisible (the next run starts after the replayed offsets).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from tabletopic.crashpoints import crash_point
from tabletopic.records.encoder import Record, build_batch
from tabletopic.s3stream.streams import StoredBatch
from tabletopic.table import tables
from tabletopic.table.commit import StalePlan, commit_data_files, committed_state
from tabletopic.table.convert.rows import (
    DLQ_HEADER_OFFSET,
    DLQ_HEADER_PARTITION,
    DLQ_HEADER_REASON,
    DLQ_HEADER_TOPIC,
    FailedRecord,
    RecordConverter,
    convert_slice,
)
from tabletopic.table.convert.unify import SchemaConflict, conform_batch
from tabletopic.table.ops.status import DLQ_OFFSETS_PROPERTY, table_facts
from tabletopic.table.ops.topic_read import dlq_position, read_all
from tabletopic.table.table_config import TableTopicConfig

log = logging.getLogger(__name__)

DLQ_HEADERS = frozenset({DLQ_HEADER_REASON, DLQ_HEADER_TOPIC, DLQ_HEADER_PARTITION, DLQ_HEADER_OFFSET})
MAX_ATTEMPTS = 5


class RedriveError(Exception):
    """The dead letters cannot be replayed (still failing, no DLQ configured, upsert table...)."""


@dataclass
class RedriveResult:
    replayed: int = 0  # rows committed
    dead_letters_read: int = 0  # DLQ records read (of this topic and others)
    still_failing: list[FailedRecord] = field(default_factory=list)  # left out with --skip-failing
    snapshot_id: int | None = None
    dlq_offsets: dict[int, int] = field(default_factory=dict)


def replayed_offsets(table: Table | None, dlq_topic: str) -> dict[int, int]:
    """The DLQ offsets (next offset per DLQ partition) already replayed into ``table``."""
    if table is None:
        return {}
    raw = dict(table_facts(table).carried).get(DLQ_OFFSETS_PROPERTY)
    if raw is None:
        return {}
    value = json.loads(raw)
    if value.get("topic") != dlq_topic:
        return {}
    return {int(p): int(o) for p, o in value.get("offsets", {}).items()}


def encode_replayed(dlq_topic: str, offsets: dict[int, int]) -> str:
    return json.dumps(
        {"topic": dlq_topic, "offsets": {str(p): o for p, o in sorted(offsets.items())}},
        separators=(",", ":"),
    )


@dataclass
class _DeadLetters:
    """The dead letters of one topic read in one pass, grouped by original partition."""

    by_partition: dict[int, list[tuple[int, Record]]] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)
    read: int = 0


def _read_dead_letters(
    bootstrap: str,
    dlq_topic: str,
    topic: str,
    start: dict[int, int],
    committed: dict[int, int],
    progress: Callable[[int], None],
) -> _DeadLetters:
    """Dead letters from ``start`` on, stopping in each DLQ partition at the first letter of a record
    the pipeline has not committed past yet: the pipeline may still process that record itself
    (and, the cause being fixed, ingest it), so replaying it too would duplicate it."""
    letters = _DeadLetters(next_offsets=dict(start))
    blocked: set[int] = set()
    for dlq_partition, msg in read_all(bootstrap, dlq_topic, start=start):
        if dlq_partition in blocked:
            continue
        position = dlq_position(msg.headers(), topic)
        if position is not None and position[1] >= committed.get(position[0], 0):
            blocked.add(dlq_partition)
            continue
        letters.read += 1
        letters.next_offsets[dlq_partition] = msg.offset() + 1
        progress(1)
        if position is None:
            continue  # another topic's dead letter sharing the DLQ
        headers = tuple((k, v) for k, v in (msg.headers() or []) if k not in DLQ_HEADERS)
        _, stamp = msg.timestamp()
        record = Record(msg.key(), msg.value(), headers, stamp if stamp and stamp > 0 else None)
        letters.by_partition.setdefault(position[0], []).append((position[1], record))
    return letters


def _convert(
    letters: _DeadLetters, converter: RecordConverter
) -> tuple[list[pa.RecordBatch], list[FailedRecord]]:
    """Rows of the dead letters at their original positions (one stored batch per record, so each
    keeps its own offset); the same record dead-lettered twice (a crash before the pipeline's
    commit) becomes one row."""
    batches: list[pa.RecordBatch] = []
    failed: list[FailedRecord] = []
    for partition, entries in sorted(letters.by_partition.items()):
        unique = dict(sorted(entries, key=lambda e: e[0]))
        stored = [StoredBatch(offset, 1, build_batch([record])) for offset, record in sorted(unique.items())]
        result = convert_slice(stored, min(unique), max(unique) + 1, partition, converter)
        failed.extend(result.failures)
        if result.batch is not None and result.batch.num_rows:
            batches.append(result.batch)
    return batches, failed


def _write(table: Table, batches: list[pa.RecordBatch]) -> list[Any]:
    from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow

    target = schema_to_pyarrow(table.schema(), include_field_ids=False)
    frame = pa.Table.from_batches([conform_batch(b, target) for b in batches], schema=target)
    return list(
        _dataframe_to_data_files(
            table_metadata=table.metadata, write_uuid=uuid.uuid4(), df=frame, io=table.io
        )
    )


def redrive(
    bootstrap: str,
    catalog: Catalog,
    topic: str,
    config: TableTopicConfig,
    converter: RecordConverter,
    skip_failing: bool = False,
    progress: Callable[[int], None] = lambda _n: None,
) -> RedriveResult:
    """Replay the dead letters of ``topic`` not yet replayed into its table.

    Raises:
        RedriveError: no DLQ, an upsert/CDC table, records that still fail (unless
            ``skip_failing``), or a table that kept moving for :data:`MAX_ATTEMPTS` attempts.
    """
    if not config.dlq_topic:
        raise RedriveError(f"{topic} has no dead-letter topic (automq.table.topic.errors.dlq.topic)")
    if config.writes_deletes:
        raise RedriveError(f"{topic} is an upsert/CDC table topic: redrive supports append tables")
    ident = tables.identifier(config, topic)
    for _attempt in range(MAX_ATTEMPTS):
        table = catalog.load_table(ident)
        state = committed_state(table)
        start = replayed_offsets(table, config.dlq_topic)
        letters = _read_dead_letters(bootstrap, config.dlq_topic, topic, start, state.offsets, progress)
        result = RedriveResult(dead_letters_read=letters.read, dlq_offsets=letters.next_offsets)
        if letters.next_offsets == start:
            return result  # nothing new in the DLQ
        batches, failed = _convert(letters, converter)
        if failed and not skip_failing:
            first = failed[0]
            raise RedriveError(
                f"{len(failed)} dead letters still fail, e.g. partition {first.partition} offset "
                f"{first.offset}: {first.reason} (fix the cause, or pass --skip-failing to leave them)"
            )
        result.still_failing = failed
        if batches:
            # Reloaded for the evolved schema; the commit stays conditional on the snapshot the
            # offsets were read at (``state``), so a commit landing meanwhile means a re-plan.
            try:
                table = tables.table_for_batches(catalog, ident, table, batches, config)
            except SchemaConflict as exc:
                raise RedriveError(str(exc)) from exc
        files = _write(table, batches) if batches else []
        rows = sum(b.num_rows for b in batches)
        facts = table_facts(table)
        extra = {
            **facts.next_commit_properties(0, 0),
            DLQ_OFFSETS_PROPERTY: encode_replayed(config.dlq_topic, letters.next_offsets),
            "tabletopic.rows": str(rows),
            "tabletopic.redriven": str(rows),
        }
        crash_point("table.redrive_before_commit")
        try:
            result.snapshot_id = commit_data_files(
                table, files, state.offsets, state, state.epoch, state.topic_id, extra
            )
        except StalePlan as exc:
            log.info("redrive of %s re-plans: %s", topic, exc)
            tables.remove_files(table, [f.file_path for f in files])
            continue
        crash_point("table.redrive_after_commit")
        result.replayed = rows
        return result
    raise RedriveError(f"the table of {topic} kept moving; {MAX_ATTEMPTS} attempts to commit failed")
