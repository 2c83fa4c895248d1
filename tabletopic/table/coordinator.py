"""The table coordinator: one pipeline per table topic, each committing exactly once.

Every cycle a pipeline (1) takes or renews the topic's lease, (2) reads the committed offsets back
from the table, (3) asks the table worker for the ready ranges, (4) runs the ingest job, (5) checks
the lease and commits the job's files together with the new offsets, conditionally on the snapshot
it planned against. A crash anywhere before (5) leaves the table untouched (orphan data files at
most, removed by maintenance); a crash after it is invisible because the next cycle starts from the
offsets the table holds. A conflict re-plans from the table instead of committing twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from tabletopic.crashpoints import crash_point
from tabletopic.s3stream.objectstore import ObjectStoreSpec
from tabletopic.table import row_delta, tables
from tabletopic.table.commit import (
    COORDINATOR_PROPERTY,
    CommittedState,
    Fence,
    StalePlan,
    commit_data_files,
    committed_state,
    offset_properties,
)
from tabletopic.table.convert.rows import FailedRecord
from tabletopic.table.ingest_task import InProcessRunner
from tabletopic.table.job import JobResult, JobRunner, JobSpec, task_metadata_json
from tabletopic.table.key_index import KeyCache
from tabletopic.table.lease import CoordinatorLeases, Lease, LeaseFenced
from tabletopic.table.ops.lag import record_high_watermarks, refresh_oldest_waiting
from tabletopic.table.ops.status import TableFacts, table_facts
from tabletopic.table.ports import TopicDirectory, TopicView
from tabletopic.table.schema_evolution import IncompatibleTableSchema
from tabletopic.table.table_config import ErrorsTolerance, TableTopicConfig
from tabletopic.table.worker import TableWorker, WorkItem, cap_items
from tabletopic.tasks import cancel_and_wait, set_or_timeout

log = logging.getLogger(__name__)

DeadLetterSink = Callable[[str, str, list[FailedRecord]], Awaitable[None]]

# A job may report a new schema a few times in a row (several schema versions in one batch are
# unified in one report); more than this means something keeps changing under us.
MAX_SCHEMA_ROUNDS = 5
# Records per work item a first job decodes to learn the schema before the table exists.
PROBE_RECORDS = 2000
# A FAILED pipeline whose configs did not change tries again after this long, doubling up to the
# maximum while it keeps failing: causes outside the configs go away too (a schema registered, a
# catalog or registry back), and a retry costs one job at most.
FAILED_RETRY_S = 30.0
FAILED_RETRY_MAX_S = 600.0


class PipelineState(StrEnum):
    """Where a table topic's pipeline is (shown by ``tables describe`` and ``/v1/tables``)."""

    STARTING = "STARTING"
    RUNNING = "RUNNING"  # a cycle is planning, running a job or committing
    IDLE = "IDLE"  # the last cycle found nothing new to ingest
    # Stopped on an error; tries again at once when the topic's configs change or an operator
    # resumes it, and by itself after a backoff (FAILED_RETRY_S).
    FAILED = "FAILED"
    FENCED = "FENCED"  # another node's coordinator holds the topic's lease
    STOPPED = "STOPPED"  # no longer a table topic, or the node is stopping
    PAUSED = "PAUSED"  # an operator paused it (console or admin API); resumes where it stopped


@dataclass
class PipelineStatus:
    """What ``tabletopic tables describe`` and the admin API show for one table topic."""

    topic: str
    table: str
    state: PipelineState = PipelineState.STARTING
    last_commit_time: float | None = None
    last_commit_snapshot: int | None = None
    committed_offsets: dict[int, int] = field(default_factory=dict)
    high_watermarks: dict[int, int] = field(default_factory=dict)
    # Log start offsets (records below were removed by retention) and, per partition with records
    # waiting, (first waiting offset, its batch timestamp in ms): see tabletopic.table.ops.lag.
    log_starts: dict[int, int] = field(default_factory=dict)
    oldest_waiting: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Rows in the table, commits, skipped and lost records: read from the table's snapshot summaries
    # (tabletopic.table.ops.status), so they survive restarts; None until first read.
    facts_loaded: bool = False
    rows_committed: int = 0
    records_skipped: int = 0
    # Tombstones (null values) left out of an append table, or with no key to delete by.
    tombstones_skipped: int = 0
    records_lost_to_retention: int = 0
    commits: int = 0
    last_error: str | None = None
    # A setting worth changing though nothing failed (TableTopicConfig.history_warning).
    warning: str | None = None
    last_job_seconds: float | None = None
    # Stored bytes per record the last job read: estimates pending bytes for commit.max.bytes.
    bytes_per_record: float | None = None
    # Where the last committed job's time went: the tasks' read/decode/write seconds (summed over
    # tasks), the job's wall time and the conditional commit's, for benches and tuning.
    last_job_timings: dict[str, float] = field(default_factory=dict)
    # The last run of each maintenance task: {"task": {"at": epoch seconds, ...its result or error}}.
    maintenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)

    def first_waiting_offset(self, partition: int) -> int:
        """The offset of the oldest record of ``partition`` not yet in the table."""
        return max(self.committed_offsets.get(partition, 0), self.log_starts.get(partition, 0))

    @property
    def lag_records(self) -> int:
        """Records below the high watermark (acknowledged) not yet committed to the table."""
        return sum(max(hw - self.first_waiting_offset(p), 0) for p, hw in self.high_watermarks.items())

    @property
    def lag_seconds(self) -> float:
        return self.lag_seconds_at(time.time())

    def lag_seconds_at(self, now: float) -> float:
        """Age of the oldest record not yet committed (its timestamp, from its stored batch); 0 when
        the table is caught up or the age is not known yet."""
        stamps = [
            stamp
            for p, (offset, stamp) in self.oldest_waiting.items()
            if offset == self.first_waiting_offset(p) and self.high_watermarks.get(p, 0) > offset
        ]
        if not stamps:
            return 0.0
        return max(now - min(stamps) / 1000, 0.0)

    def apply_facts(self, facts: TableFacts) -> None:
        """Take rows, commits, the last commit and skipped/lost counts from the table."""
        self.rows_committed = facts.rows
        self.commits = facts.commits
        self.last_commit_time = facts.last_commit_time
        self.last_commit_snapshot = facts.last_commit_snapshot
        self.records_skipped = facts.records_skipped
        self.records_lost_to_retention = facts.records_lost_to_retention
        self.facts_loaded = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "table": self.table,
            "state": str(self.state),
            "last_commit_time": self.last_commit_time,
            "last_commit_snapshot": self.last_commit_snapshot,
            "committed_offsets": {str(k): v for k, v in sorted(self.committed_offsets.items())},
            "high_watermarks": {str(k): v for k, v in sorted(self.high_watermarks.items())},
            "lag_records": self.lag_records,
            "lag_seconds": self.lag_seconds,
            "rows_committed": self.rows_committed,
            "records_skipped": self.records_skipped,
            "tombstones_skipped": self.tombstones_skipped,
            "records_lost_to_retention": self.records_lost_to_retention,
            "commits": self.commits,
            "last_error": self.last_error,
            "warning": self.warning,
            "last_job_seconds": self.last_job_seconds,
            "last_job_timings": dict(self.last_job_timings),
            "maintenance": {k: dict(v) for k, v in self.maintenance.items()},
        }


class PipelineObserver(Protocol):
    def committed(self, topic: str, job: JobResult, seconds: float) -> None: ...

    def observe(self, status: PipelineStatus) -> None: ...


# Runs the table's due maintenance tasks; returns what ran ({task: result}) for the status.
Maintenance = Callable[[Table, TableTopicConfig], dict[str, Any] | None]
# Maintenance (expiry, compaction) of one table runs at most this often.
MAINTENANCE_INTERVAL_S = 60.0


@dataclass(frozen=True)
class CoordinatorContext:
    """Everything a pipeline needs from the node, injected so tests can swap any part."""

    directory: TopicDirectory
    worker: TableWorker
    catalog: Catalog
    runner: JobRunner
    leases: CoordinatorLeases
    object_store_spec: ObjectStoreSpec
    schema_registry_url: str | None
    dead_letters: DeadLetterSink | None = None
    observer: PipelineObserver | None = None
    # The Spark catalog name the platform's catalog has in the runner's session (for maintenance).
    spark_catalog: str = "tabletopic"
    maintenance: Maintenance | None = None
    native_decode: bool = True
    # Upsert/CDC tables' keys by data file, kept between commits (``table.upsert.key.cache.bytes``).
    key_cache: KeyCache | None = None
    max_task_bytes: int = 64 * 1024 * 1024
    # ``table.upsert.max.cycle.bytes``: stored bytes one upsert/CDC commit takes at most.
    upsert_max_cycle_bytes: int = 128 * 1024 * 1024


class TopicPipeline:
    def __init__(self, ctx: CoordinatorContext, topic: str) -> None:
        self._ctx = ctx
        self.topic = topic
        self.status = PipelineStatus(topic=topic, table="")
        self._failed_config: dict[str, str] | None = None
        self._retry_at = 0.0  # monotonic time a FAILED pipeline tries again with the same configs
        self._retry_delay = FAILED_RETRY_S  # the backoff of the next failure
        self._last_maintenance = time.monotonic()
        self.lease: Lease | None = None  # the last lease taken, released when the pipeline stops
        # Seconds of this cycle's phases before the commit (planning, the schema probe, creating or
        # evolving the table): reported with the job's own split in ``last_job_timings``.
        self._phases: dict[str, float] = {}
        # The last cycle left ready records behind on purpose (an upsert cycle's cap): the next
        # one runs at once instead of a commit interval later.
        self.more_ready = False

    async def run_cycle(self) -> bool:
        """One plan → job → commit round. Returns True when it committed something."""
        started = time.monotonic()
        self._phases = {}
        self.more_ready = False
        view = self._ctx.directory.topic(self.topic)
        if view is None:
            self.status.state = PipelineState.STOPPED
            return False
        config = TableTopicConfig.from_topic_configs(dict(view.configs), topic=view.name)
        if not config.enabled:
            self.status.state = PipelineState.STOPPED
            return False
        heavy = config.history_warning(len(view.partitions))
        if heavy != self.status.warning:  # logged once a setting, not every cycle
            self.status.warning = heavy
            if heavy is not None:
                log.warning("table topic %s: %s", view.name, heavy)
        if self._failed_config is not None:
            if self._failed_config == dict(view.configs) and time.monotonic() < self._retry_at:
                return False  # stopped by a fatal error: until the configs change, resume or backoff
            # The cycle starts from the offsets the table holds, like any other: nothing the failed
            # cycles read was committed, so resuming reads it again exactly once.
            self._failed_config = None
        identifier = tables.identifier(config, view.name)
        self.status.table = ".".join(identifier)
        lease = await asyncio.to_thread(self._ctx.leases.acquire, self.topic, None, view.coordinator_claim)
        if lease is None:
            self.status.state = PipelineState.FENCED
            return False
        self.lease = lease
        table = await asyncio.to_thread(self._load_table, identifier)
        if table is not None:
            await asyncio.to_thread(tables.sync_partition_spec, table, config)
        facts = table_facts(table) if table is not None else TableFacts()
        self.status.apply_facts(facts)
        state = committed_state(table) if table is not None else CommittedState(None)
        conflict = self._owner_conflict(view, config, state)
        if conflict is not None:
            self._fail(view, conflict)
            return False
        offsets = dict(state.offsets)
        if state.topic_id is not None and state.topic_id != view.topic_id:
            log.warning(
                "topic %s was recreated (id %s, table was fed by %s): ingesting it from the start",
                view.name,
                view.topic_id,
                state.topic_id,
            )
            offsets = {}
        # What this cycle plans against; the commit is conditional on exactly this snapshot, even if
        # the table object is refreshed meanwhile (schema evolution reloads it).
        planned = CommittedState(state.snapshot_id, offsets, view.topic_id, state.epoch)
        self.status.committed_offsets = offsets
        await self._ctx.worker.refresh(view)
        ranges = await self._ctx.worker.ranges(view, offsets)
        self._record_high_watermarks(view)
        if not ranges:
            self.status.state = PipelineState.IDLE
            self._retry_delay = FAILED_RETRY_S  # whatever failed before is behind it
            return False
        lost = sum(r.lost for r in ranges)
        prepared = await self._ctx.worker.prepare(view, ranges)
        if config.writes_deletes:
            # The commit reads the whole batch's rows into this process: bound it.
            ranges, prepared, self.more_ready = cap_items(ranges, prepared, self._ctx.upsert_max_cycle_bytes)
        items = tuple(prepared)
        self._phases["plan"] = time.monotonic() - started
        crash_point("table.planned")
        new_offsets = {r.partition: r.end_offset for r in ranges}
        result = await self._run_job(view, config, table, identifier, items)
        if result is None:
            return False
        table, job = result
        if job.fatal_error is not None:
            self._fail(view, job.fatal_error)
            return False
        if job.skipped:
            await self._dead_letter(config, job.skipped)
        crash_point("table.before_commit")
        commit_started = time.monotonic()
        # The lease (in a cluster, the leadership of partition 0) is checked inside the commit, right
        # before the catalog's commit request: see tabletopic.table.commit for what guards the rest.
        fence = functools.partial(self._ctx.leases.confirm, lease)
        try:
            assert table is not None
            extra = {
                "tabletopic.rows": str(job.rows),
                "tabletopic.skipped": str(len(job.skipped)),
                **facts.next_commit_properties(len(job.skipped), lost),
                COORDINATOR_PROPERTY: lease.owner,
                "tabletopic.tombstones": str(job.tombstones),
            }
            if config.writes_deletes:
                snapshot_id = await self._commit_upsert(
                    view, config, table, job, planned, new_offsets, lease.epoch, extra, fence
                )
            else:
                snapshot_id = await asyncio.to_thread(
                    commit_data_files,
                    table,
                    job.data_files,
                    new_offsets,
                    planned,
                    lease.epoch,
                    view.topic_id,
                    extra,
                    fence,
                )
        except (StalePlan, LeaseFenced) as exc:
            log.warning("topic %s: commit not applied, re-planning from the table (%s)", view.name, exc)
            self.status.state = (
                PipelineState.FENCED if isinstance(exc, LeaseFenced) else PipelineState.RUNNING
            )
            return False
        crash_point("table.after_commit")
        merged = dict(offsets)
        merged.update(new_offsets)
        self.status.state = PipelineState.RUNNING
        self.status.committed_offsets = merged
        self.status.last_commit_time = time.time()
        self.status.last_commit_snapshot = snapshot_id
        # Appends add exactly their rows; an upsert's effect is read back from the table.
        self.status.rows_committed = facts.rows + job.rows
        if config.writes_deletes:
            merged_table = await asyncio.to_thread(self._load_table, identifier)
            if merged_table is not None:
                self.status.rows_committed = table_facts(merged_table).rows
        if job.rows:
            self.status.bytes_per_record = job.bytes_read / (job.rows + len(job.skipped))
        self.status.records_skipped = facts.records_skipped + len(job.skipped)
        self.status.records_lost_to_retention = facts.records_lost_to_retention + lost
        self.status.commits = facts.commits + 1
        self.status.tombstones_skipped += job.tombstones
        self.status.last_error = None
        self._retry_delay = FAILED_RETRY_S
        self.status.last_job_timings = {
            **job.timings,
            **self._phases,
            "job": self.status.last_job_seconds or 0.0,
            "commit": time.monotonic() - commit_started,
        }
        if self._ctx.observer is not None:
            self._ctx.observer.committed(self.topic, job, time.monotonic() - started)
        await self._maintain(table, config)
        log.info(
            "topic %s: committed %d rows (%d skipped) to %s at snapshot %d in %.2fs",
            view.name,
            job.rows,
            len(job.skipped),
            self.status.table,
            snapshot_id,
            self.status.last_job_seconds or 0.0,
        )
        return True

    async def _commit_upsert(
        self,
        view: TopicView,
        config: TableTopicConfig,
        table: Table,
        job: JobResult,
        planned: CommittedState,
        offsets: dict[int, int],
        epoch: int,
        extra: dict[str, str],
        fence: Fence,
    ) -> int:
        """Upsert/CDC: the staged rows replace their keys' rows (position deletes located by key,
        plus the batch's latest rows) in one commit carrying the offsets, conditional on the planned
        snapshot like an append (:mod:`tabletopic.table.row_delta`)."""
        try:
            if not job.staged_paths:
                return await asyncio.to_thread(
                    commit_data_files, table, [], offsets, planned, epoch, view.topic_id, extra, fence
                )
            rows = await asyncio.to_thread(row_delta.read_staged, table.io, job.staged_paths)
            snapshot_id, stats = await asyncio.to_thread(
                row_delta.commit_upsert,
                table,
                rows,
                tables.merge_keys(config, table),
                tables.delete_column(config),
                planned,
                offset_properties(planned, offsets, epoch, view.topic_id, extra),
                self._ctx.key_cache,
                fence,
            )
            log.debug("topic %s: upsert commit %s", view.name, stats)
            return snapshot_id
        finally:
            await asyncio.to_thread(tables.remove_files, table, job.staged_paths)

    async def _maintain(self, table: Table, config: TableTopicConfig) -> None:
        if (
            self._ctx.maintenance is None
            or time.monotonic() - self._last_maintenance < MAINTENANCE_INTERVAL_S
        ):
            return
        self._last_maintenance = time.monotonic()
        try:
            report = await asyncio.to_thread(self._ctx.maintenance, table, config)
        except Exception:
            log.exception("topic %s: table maintenance failed (ingest continues)", self.topic)
            return
        now = time.time()
        for task, result in (report or {}).items():
            self.status.maintenance[task] = {"at": now, **result}

    def _load_table(self, identifier: tuple[str, str]) -> Table | None:
        try:
            return self._ctx.catalog.load_table(identifier)
        except NoSuchTableError:
            return None

    async def _run_job(
        self,
        view: TopicView,
        config: TableTopicConfig,
        table: Table | None,
        identifier: tuple[str, str],
        items: tuple[Any, ...],
    ) -> tuple[Table | None, JobResult] | None:
        """Run the job, creating or evolving the table as often as it reports a new schema."""
        if table is None:
            # A job without a table only reports the rows' schema and throws the rows away, so a
            # backlog would be decoded twice: learn the schema from the first records of each item
            # first. Versions seen only later evolve the table in the loop below, as usual.
            began = time.monotonic()
            probe = await self._probe(view, config, identifier, items)
            self._phases["probe"] = time.monotonic() - began
            if probe is not None:
                if probe[1].fatal_error is not None:
                    return probe
                table = probe[0]
        for _ in range(MAX_SCHEMA_ROUNDS):
            spec = JobSpec(
                topic=view.name,
                topic_configs=dict(view.configs),
                items=items,
                table_metadata_json=None if table is None else task_metadata_json(table.metadata),
                # A fresh directory per attempt: a retried job never mixes with an earlier one's files.
                stage_dir=None
                if table is None or not config.writes_deletes
                else f"{table.location().rstrip('/')}/staging/{uuid.uuid4()}",
                io_properties={} if table is None else dict(table.io.properties),
                object_store_spec=self._ctx.object_store_spec,
                schema_registry_url=self._ctx.schema_registry_url,
                native_decode=self._ctx.native_decode,
                max_task_bytes=self._ctx.max_task_bytes,
            )
            started = time.monotonic()
            job = await asyncio.to_thread(self._ctx.runner.run, spec)
            self.status.last_job_seconds = time.monotonic() - started
            if job.fatal_error is not None:
                return table, job
            if job.needs_schema is None:
                if table is None:
                    # Every record was skipped: create the table from the columns every row has, so
                    # the skipped range is committed (and not sent to the dead-letter topic again).
                    table = await asyncio.to_thread(
                        tables.ensure_schema, self._ctx.catalog, identifier, None, tables.BASE_SCHEMA, config
                    )
                elif not self._partition_columns_exist(view, config, table):
                    return None
                return table, job
            if table is None:
                # The first commit is where the value's columns become known: a partition.by
                # column missing from them would leave the table unpartitioned for good.
                missing = tables.missing_partition_columns(job.needs_schema, config)
                if missing:
                    self._fail(view, tables.partition_error(view.name, job.needs_schema, missing))
                    return None
            began = time.monotonic()
            try:
                table = await asyncio.to_thread(
                    tables.ensure_schema, self._ctx.catalog, identifier, table, job.needs_schema, config
                )
            except IncompatibleTableSchema as exc:
                self._fail(view, str(exc))
                return None
            self._phases["schema"] = self._phases.get("schema", 0.0) + time.monotonic() - began
        self._fail(view, f"the schema kept changing over {MAX_SCHEMA_ROUNDS} attempts")
        return None

    def _partition_columns_exist(self, view: TopicView, config: TableTopicConfig, table: Table) -> bool:
        """Whether the table has every ``partition.by`` column; puts the topic in error if not."""
        if not config.partition_by:
            return True
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        schema = schema_to_pyarrow(table.schema(), include_field_ids=False)
        missing = tables.missing_partition_columns(schema, config)
        if missing:
            self._fail(view, tables.partition_error(view.name, schema, missing))
        return not missing

    def _owner_conflict(self, view: TopicView, config: TableTopicConfig, state: CommittedState) -> str | None:
        """Why this topic must not write its table because another table topic maps to it too
        (topics configured before that was refused), or None. The topic whose offsets the table
        holds keeps it (the first by name while the table has none); the others stop."""
        others = self._ctx.directory.table_topics()
        conflict = tables.table_owner_conflict(view.name, config, others)
        if conflict is None or state.topic_id == view.topic_id:
            return None
        if state.topic_id is None:
            rivals = [
                o.name
                for o in others
                if o.name != view.name
                and tables.table_owner_conflict(
                    o.name, TableTopicConfig.from_topic_configs(dict(o.configs), o.name), [view]
                )
                is not None
            ]
            if all(view.name < name for name in rivals):
                return None
        return conflict

    async def _probe(
        self, view: TopicView, config: TableTopicConfig, identifier: tuple[str, str], items: tuple[Any, ...]
    ) -> tuple[Table | None, JobResult] | None:
        """Create the table from the schema of the first :data:`PROBE_RECORDS` records of every
        item. Returns ``(table, probe result)``, or None when the probe learnt nothing (every
        record skipped: the full job creates the table as before).

        The probe runs here, in this process, not as a job: a job's fixed cost (scheduling, a
        Python worker per task) is most of a small probe's time. It reads only the slices holding
        those first records and decodes them per record (the native decoders give the same schema,
        a property test holds them to it), so the broker never loads DataFusion or ptars."""
        sample = tuple(
            _probe_item(item) for item in items if item.end_offset - item.start_offset > PROBE_RECORDS
        )
        if not sample or len(sample) < len(items):
            return None  # small ranges: the full job is as cheap as the probe
        spec = JobSpec(
            topic=view.name,
            topic_configs=dict(view.configs),
            items=sample,
            table_metadata_json=None,
            io_properties={},
            object_store_spec=self._ctx.object_store_spec,
            schema_registry_url=self._ctx.schema_registry_url,
            native_decode=False,
            max_task_bytes=self._ctx.max_task_bytes,
        )
        probe = await asyncio.to_thread(InProcessRunner().run, spec)
        if probe.fatal_error is not None:
            return None, probe
        if probe.needs_schema is None:
            return None
        missing = tables.missing_partition_columns(probe.needs_schema, config)
        if missing:
            return None  # the full job reports it, with every record's columns
        try:
            table = await asyncio.to_thread(
                tables.ensure_schema, self._ctx.catalog, identifier, None, probe.needs_schema, config
            )
        except IncompatibleTableSchema:
            return None
        return table, probe

    def _record_high_watermarks(self, view: TopicView) -> None:
        record_high_watermarks(self._ctx.worker, view, self.status)

    def resume(self) -> None:
        """Let a FAILED pipeline run its next cycle now (``tables resume``) instead of waiting for a
        config change or its backoff; the backoff starts over."""
        self._retry_at = 0.0
        self._retry_delay = FAILED_RETRY_S

    def _fail(self, view: TopicView, message: str) -> None:
        delay = self._retry_delay
        self._retry_at = time.monotonic() + delay
        self._retry_delay = min(delay * 2, FAILED_RETRY_MAX_S)
        log.error(
            "topic %s: table pipeline stopped: %s (retrying in %.0fs, or at once on a config change or "
            "`tables resume`)",
            view.name,
            message,
            delay,
        )
        self.status.state = PipelineState.FAILED
        self.status.last_error = message
        self._failed_config = dict(view.configs)

    async def _dead_letter(self, config: TableTopicConfig, skipped: list[FailedRecord]) -> None:
        if config.errors_tolerance is ErrorsTolerance.NONE:
            return
        if config.dlq_topic and self._ctx.dead_letters is not None:
            # Written before the commit: after a crash a record may reach the DLQ twice, never zero
            # times.
            await self._ctx.dead_letters(config.dlq_topic, self.topic, skipped)
        for record in skipped[:5]:
            log.warning(
                "topic %s: skipped record at partition %d offset %d: %s",
                self.topic,
                record.partition,
                record.offset,
                record.reason,
            )


def _probe_item(item: WorkItem) -> WorkItem:
    """``item`` cut to its first :data:`PROBE_RECORDS` records and the slices that hold them."""
    end = min(item.end_offset, item.start_offset + PROBE_RECORDS)
    slices = []
    for piece in item.slices:
        slices.append(piece)
        if piece.end_offset >= end:
            break
    return dataclasses.replace(item, end_offset=end, slices=tuple(slices))


class TableCoordinator:
    """Runs a :class:`TopicPipeline` for every table topic this node leads."""

    def __init__(self, ctx: CoordinatorContext, poll_interval: float = 1.0, max_concurrent: int = 2) -> None:
        self._ctx = ctx
        self._poll = poll_interval
        self._slots = asyncio.Semaphore(max_concurrent)
        self._running: dict[str, asyncio.Task[None]] = {}
        self.pipelines: dict[str, TopicPipeline] = {}
        self._next_run: dict[str, float] = {}
        self._triggers: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        # Topics an operator paused: no cycle starts for them (one already running finishes). Kept
        # in memory only: a restart resumes every topic.
        self.paused: set[str] = set()
        self._releases: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="table-coordinator")
        self._task.add_done_callback(self._on_done)

    @staticmethod
    def _on_done(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("table coordinator stopped", exc_info=task.exception())

    async def stop(self) -> None:
        await cancel_and_wait(self._running.values())
        await cancel_and_wait(self._releases)
        await cancel_and_wait([self._task])
        self._task = None

    def trigger(self, topic: str | None = None) -> None:
        """Run the next cycle now (for ``tabletopic tables commit`` and tests)."""
        for name in [topic] if topic else list(self._next_run):
            self._next_run[name] = 0.0
            # A cycle already running planned before this call: it must not push the next run a
            # whole interval away when it ends (see _cycle).
            self._triggers[name] = self._triggers.get(name, 0) + 1
        self._wake.set()

    def pause(self, topic: str) -> None:
        """Start no more cycles for ``topic`` until :meth:`resume` (records keep arriving and wait)."""
        self.paused.add(topic)
        pipeline = self.pipelines.get(topic)
        if pipeline is None:
            return
        running = self._running.get(topic)
        if running is None or running.done():
            pipeline.status.state = PipelineState.PAUSED
            return

        # A cycle under way ends as IDLE (or after its commit): the page would read IDLE until the
        # next look at due topics. Say PAUSED as soon as it ends, unless resumed meanwhile.
        def paused_after(_task: asyncio.Task[None]) -> None:
            if topic in self.paused and pipeline.status.state != PipelineState.FAILED:
                pipeline.status.state = PipelineState.PAUSED

        running.add_done_callback(paused_after)

    def resume(self, topic: str) -> None:
        """Undo :meth:`pause`, or let a FAILED topic try again, and run its next cycle now."""
        self.paused.discard(topic)
        pipeline = self.pipelines.get(topic)
        if pipeline is not None:
            pipeline.resume()
        self.trigger(topic)

    def _running_now(self) -> set[str]:
        return {name for name, task in self._running.items() if not task.done()}

    async def _loop(self) -> None:
        while True:
            await self.run_due(wait=False)
            await self.refresh_lag()
            self._wake.clear()
            await set_or_timeout(self._wake, self._until_next_due())

    def _until_next_due(self) -> float:
        """Seconds to sleep before the next look: the poll interval, or less when a topic's next
        cycle falls due sooner (a 1 s commit interval must not wait for a 1 s poll on top)."""
        running, now = self._running_now(), time.monotonic()
        # A due time already past belongs to a topic run_due just declined (invalid configs): the
        # poll interval retries it, not a busy loop.
        dues = [
            due
            for name, due in self._next_run.items()
            if due > now and name not in running and name not in self.paused
        ]
        return min([self._poll, *(due - now for due in dues)])

    def refresh_watermarks(self, pipeline: TopicPipeline) -> None:
        """Read ``pipeline``'s high watermarks from the store now (cheap: in-memory offsets)."""
        view = self._ctx.directory.topic(pipeline.topic)
        if view is not None:
            record_high_watermarks(self._ctx.worker, view, pipeline.status)

    async def refresh_lag(self, topic: str | None = None) -> None:
        """Refresh high watermarks and the oldest waiting record's age of one or every pipeline."""
        for name, pipeline in list(self.pipelines.items()):
            if topic is not None and name != topic:
                continue
            view = self._ctx.directory.topic(name)
            if view is None:
                continue
            try:
                await refresh_oldest_waiting(self._ctx.worker, view, pipeline.status)
            except Exception:  # status must never break the loop
                log.debug("topic %s: lag refresh failed", name, exc_info=True)

    async def live_status(self, topic: str) -> PipelineStatus | None:
        """``topic``'s status with lag measured now and, if no cycle has read it yet (a queued first
        cycle after a restart), rows and commits read from the table."""
        pipeline = self.pipelines.get(topic)
        if pipeline is None:
            return None
        if not pipeline.status.facts_loaded:
            await asyncio.to_thread(self._load_facts, pipeline)
        await self.refresh_lag(topic)
        return pipeline.status

    def _load_facts(self, pipeline: TopicPipeline) -> None:
        view = self._ctx.directory.topic(pipeline.topic)
        if view is None:
            return
        try:
            config = TableTopicConfig.from_topic_configs(dict(view.configs), topic=view.name)
            ident = tables.identifier(config, view.name)
            pipeline.status.table = ".".join(ident)
            table = self._ctx.catalog.load_table(ident)
        except NoSuchTableError:
            pipeline.status.apply_facts(TableFacts())
            return
        except Exception:
            log.debug("topic %s: table facts unavailable", pipeline.topic, exc_info=True)
            return
        pipeline.status.apply_facts(table_facts(table))
        state = committed_state(table)
        if state.topic_id in (None, view.topic_id) and not pipeline.status.committed_offsets:
            pipeline.status.committed_offsets = dict(state.offsets)

    async def run_due(self, wait: bool = True) -> None:
        """Start a cycle for every table topic that is due and not already running.

        Topics run concurrently (at most ``max_concurrent`` jobs), so one slow table never holds up
        the others; ``wait`` makes the call return only when the cycles it started are done.
        """
        now = time.monotonic()
        views = {v.name: v for v in self._ctx.directory.table_topics()}
        for name in list(self.pipelines):
            if name not in views:
                stopped = self.pipelines.pop(name)
                stopped.status.state = PipelineState.STOPPED
                self._next_run.pop(name, None)
                if stopped.lease is not None:  # let the next coordinator (in a cluster) take over now
                    self._release_later(stopped)
        started: list[asyncio.Task[None]] = []
        for name, view in views.items():
            pipeline = self.pipelines.get(name)
            if pipeline is None:
                pipeline = self.pipelines[name] = TopicPipeline(self._ctx, name)
                self._next_run[name] = now
            running = self._running.get(name)
            if running is not None and not running.done():
                continue
            if name in self.paused:
                pipeline.status.state = PipelineState.PAUSED
                continue
            try:
                config = TableTopicConfig.from_topic_configs(dict(view.configs), topic=name)
            except ValueError as exc:  # configs changed under us to something invalid
                pipeline.status.state, pipeline.status.last_error = PipelineState.FAILED, str(exc)
                continue
            due = self._next_run.get(name, now) <= now or self._over_threshold(view, pipeline, config)
            if due:
                task = asyncio.create_task(self._cycle(pipeline, config), name=f"table-{name}")
                self._running[name] = task
                started.append(task)
        if wait and started:
            await asyncio.gather(*started)

    def _release_later(self, pipeline: TopicPipeline) -> None:
        running = self._running.pop(pipeline.topic, None)
        lease = pipeline.lease

        async def release() -> None:
            if running is not None:
                await asyncio.gather(running, return_exceptions=True)
            if lease is not None:
                await asyncio.to_thread(self._ctx.leases.release, lease)

        task = asyncio.create_task(release(), name=f"table-release-{pipeline.topic}")
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _cycle(self, pipeline: TopicPipeline, config: TableTopicConfig) -> None:
        async with self._slots:
            triggers = self._triggers.get(pipeline.topic, 0)
            # The interval runs from this cycle's start, not its end: commits come every interval
            # (back to back when a cycle takes longer), so a record waits at most one interval for
            # the cycle that picks it up instead of an interval plus the previous cycle's length.
            began = time.monotonic()
            try:
                await pipeline.run_cycle()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("topic %s: table pipeline cycle failed; retrying next interval", pipeline.topic)
                pipeline.status.last_error = f"{type(exc).__name__}: {exc}"
        if self._triggers.get(pipeline.topic, 0) != triggers or pipeline.more_ready:
            # Triggered while running, or a capped cycle left ready records: run again now.
            self._next_run[pipeline.topic] = 0.0
        else:
            self._next_run[pipeline.topic] = began + config.commit_interval_ms / 1000.0
        if self._ctx.observer is not None:
            self._ctx.observer.observe(pipeline.status)
        self._wake.set()

    def _over_threshold(self, view: TopicView, pipeline: TopicPipeline, config: TableTopicConfig) -> bool:
        """Whether enough data waits that the pipeline should commit before its interval ends.

        Stored bytes are estimated from the waiting records and the bytes per record the last job
        read, so the check costs no I/O (it runs every poll for every topic).
        """
        status = pipeline.status
        if not config.commit_max_bytes or not status.bytes_per_record or status.state is PipelineState.FAILED:
            return False
        record_high_watermarks(self._ctx.worker, view, status)
        return status.lag_records * status.bytes_per_record >= config.commit_max_bytes
