"""The boundary between the coordinator (plans and commits) and the ingest job (reads, decodes,
writes files). Plain data both ways so the job can run in Spark executors on other machines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
from pyiceberg.table.metadata import TableMetadata

from tabletopic.s3stream.objectstore import ObjectStoreSpec
from tabletopic.table.convert.rows import FailedRecord
from tabletopic.table.worker import WorkItem


def task_metadata_json(metadata: TableMetadata) -> str:
    """The table metadata a job's tasks write data files against (schema, partition spec, sort
    order, properties, location) as JSON, without the table's history (snapshots, their log and
    the metadata log): tasks never read it, and it grows with every snapshot kept, about 1 MB at
    1,000 snapshots of a 24-partition topic, which every task parsed again (15 ms each)."""
    history: dict[str, object] = {"snapshots": [], "snapshot_log": [], "metadata_log": [], "refs": {}}
    bare = metadata.model_copy(update={**history, "current_snapshot_id": None})
    return bare.model_dump_json()


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One ingest run for one topic.

    ``table_metadata_json`` is the Iceberg metadata the data files must match (schema with field ids,
    partition spec: :func:`task_metadata_json`); ``None`` when the table does not exist yet, in
    which case the job only reports the schema of the decoded rows so the coordinator can create
    the table.
    """

    topic: str
    topic_configs: dict[str, str]
    items: tuple[WorkItem, ...]
    table_metadata_json: str | None
    io_properties: dict[str, str]
    object_store_spec: ObjectStoreSpec
    schema_registry_url: str | None
    # Upsert/CDC: write the converted rows as plain Parquet under this directory (the coordinator
    # keeps each key's latest row and commits it with position deletes) instead of Iceberg data files.
    stage_dir: str | None = None
    # Decode with the native (columnar) decoders where they apply (``table.job.native.decode``).
    native_decode: bool = True
    # ``table.job.max.task.bytes``: decoded rows a task holds before it writes them out as a file.
    max_task_bytes: int = 64 * 1024 * 1024


@dataclass
class JobResult:
    data_files: list[Any] = field(default_factory=list)  # pyiceberg DataFile objects
    staged_paths: list[str] = field(default_factory=list)  # staged Parquet files (upsert/CDC)
    rows: int = 0
    bytes_read: int = 0
    # Newest record timestamp among the rows (for the commit-delay metric).
    max_timestamp_ms: int | None = None
    skipped: list[FailedRecord] = field(default_factory=list)
    # Tombstones left out (append tables, or no key to delete by): counted, never a failure.
    tombstones: int = 0
    # Set when the decoded rows do not fit the table (or there is no table yet): the union of the
    # schemas seen. The coordinator evolves/creates the table and runs the job again; no files were
    # kept in that case.
    needs_schema: pa.Schema | None = None
    # Set when errors.tolerance=none met a bad record: the pipeline stops with this message.
    fatal_error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


class JobRunner(Protocol):
    def run(self, spec: JobSpec) -> JobResult:
        """Blocking; the coordinator calls it from a worker thread."""
