"""What one ingest task does with its work items, wherever it runs (a Spark Python worker, or the
coordinator's own process in tests): read the object slices straight from object storage, decode the
Kafka batches, convert records to Arrow rows, and write Parquet data files for the Iceberg table.

The output is a list of small Arrow rows (:data:`OUTPUT_SCHEMA`) the driver collects: data files
(pickled pyiceberg ``DataFile``s — the commit happens on the driver, once, for the whole job), the
schema of the rows when the table cannot hold them yet, skipped records for the dead-letter topic,
a fatal error under ``errors.tolerance=none``, and timings.
"""

from __future__ import annotations

import importlib
import json
import pickle
import time
import uuid
from collections.abc import Iterable, Iterator
from functools import cached_property, lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.crashpoints import crash_point
from tabletopic.records.transactions import AbortedTransaction
from tabletopic.s3stream.objects import fetch_slice
from tabletopic.s3stream.objectstore import ObjectStoreSpec, open_object_store
from tabletopic.table.convert.rows import (
    DELETE_MARKER_COLUMN,
    FailedRecord,
    RecordConversionError,
    RecordConverter,
    convert_slice,
)
from tabletopic.table.convert.unify import SchemaConflict, conform_batch, unify_schemas
from tabletopic.table.job import JobResult, JobSpec
from tabletopic.table.table_config import TableTopicConfig
from tabletopic.table.worker import WorkItem

OUTPUT_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),  # files | schema | skipped | fatal | stats
        ("payload", pa.binary()),
        ("rows", pa.int64()),
        ("message", pa.string()),
    ]
)
OUTPUT_DDL = "kind string, payload binary, rows long, message string"


@lru_cache(maxsize=8)
def _object_store(spec: ObjectStoreSpec) -> Any:
    # One client per Python worker process and spec: boto3 clients are expensive to build.
    return open_object_store(spec)


# Schema metadata of a converted batch whose every row is a delete (a tombstone's), and the message
# of a task's ``schema`` output learnt from such batches alone.
DELETES_ONLY = b"tabletopic.deletes_only"


def _deletes_only(batch: pa.RecordBatch) -> bool:
    return bool(batch.schema.metadata and DELETES_ONLY in batch.schema.metadata)


def _output(kind: str, payload: bytes = b"", rows: int = 0, message: str = "") -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"kind": kind, "payload": payload, "rows": rows, "message": message}], schema=OUTPUT_SCHEMA
    )


class IngestTask:
    """Converts work items, accumulating rows; :meth:`finish` writes them as data files."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.config = TableTopicConfig.from_topic_configs(spec.topic_configs, topic=spec.topic)
        lookup = None
        if spec.schema_registry_url and (
            self.config.value_converter.type.uses_schema or self.config.key_converter.type.uses_schema
        ):
            from tabletopic.schema_registry.client import HttpSchemaLookup

            lookup = HttpSchemaLookup(spec.schema_registry_url)
        self.converter = RecordConverter(self.config, lookup, native=spec.native_decode)
        self.store = _object_store(spec.object_store_spec)
        self.batches: list[pa.RecordBatch] = []
        self.skipped: list[FailedRecord] = []
        # Wall seconds per step, and the task's CPU seconds (this process's, native threads
        # included: a Python worker runs one task at a time) for each: on a shared machine wall
        # time mostly measures the neighbours.
        self.timings = {"read": 0.0, "decode": 0.0, "write": 0.0, "decode_cpu": 0.0, "write_cpu": 0.0}
        self.bytes_read = 0
        self.tombstones = 0
        self.rows = 0  # rows converted, held or written
        self.held = 0  # bytes of the rows held in ``batches``
        self.newest: int | None = None  # newest record timestamp converted
        self.files: list[Any] = []  # data files written before finish
        self.staged: list[str] = []  # staged files written before finish
        self.written_rows = 0
        self.schema_only = False  # the table must evolve first: rows are not held, only schemas

    def add(self, item: WorkItem) -> pa.RecordBatch | None:
        """Convert one item; returns a ``fatal`` output row when the tolerance forbids skipping.

        The item's stored batches are converted a chunk at a time (:meth:`_chunk_bytes` of them),
        and the rows held are written out as a file whenever they pass ``max_task_bytes``: a task
        holds at most one object slice of raw bytes, one chunk being decoded and that bound of
        decoded rows, whatever the size of its items."""
        aborted = [AbortedTransaction(pid, first, last) for pid, first, last in item.aborted]
        pending: list[Any] = []
        size = 0
        chunk = self._chunk_bytes()
        for piece in item.slices:
            started = time.perf_counter()
            stored = fetch_slice(self.store, piece)
            self.bytes_read += piece.size
            self.timings["read"] += time.perf_counter() - started
            for batch in stored:
                pending.append(batch)
                size += len(batch.payload)
                if size >= chunk:
                    fatal = self._convert(item, pending, aborted)
                    if fatal is not None:
                        return fatal
                    pending, size = [], 0
        if pending:
            return self._convert(item, pending, aborted)
        return None

    def _chunk_bytes(self) -> int:
        """Stored bytes converted in one go: large enough that native decoders run on big columns,
        a quarter of the task's bound so raw and decoded data of a chunk fit beside the held rows."""
        return max(256 << 10, self.spec.max_task_bytes // 4)

    def _convert(
        self, item: WorkItem, stored: list[Any], aborted: list[AbortedTransaction]
    ) -> pa.RecordBatch | None:
        started, cpu = time.perf_counter(), time.process_time()
        result = convert_slice(
            stored, item.start_offset, item.end_offset, item.partition, self.converter, aborted
        )
        self.timings["decode"] += time.perf_counter() - started
        self.timings["decode_cpu"] += time.process_time() - cpu
        try:
            self.skipped.extend(result.enforce(self.config.errors_tolerance))
        except RecordConversionError as exc:
            return _output("fatal", message=f"topic {item.topic}: {exc}")
        self.tombstones += result.tombstones
        batch = result.batch
        if batch is None or not batch.num_rows:
            return None
        marker = batch.schema.get_field_index(DELETE_MARKER_COLUMN)
        if marker >= 0 and pc.all(batch.column(marker)).as_py():
            batch = batch.replace_schema_metadata({DELETES_ONLY: b"1"})
        self.rows += batch.num_rows
        top = pc.max(pc.struct_field(batch.column("_kafka_metadata"), "timestamp")).as_py()
        if top is not None and (self.newest is None or top > self.newest):
            self.newest = top
        if self.spec.table_metadata_json is None or self.schema_only:
            batch = batch.slice(0, 0)  # only the schema is reported: the rows need not be held
        self.batches.append(batch)
        self.held += batch.nbytes
        if self.held > self.spec.max_task_bytes:
            self._write_held()
        return None

    def _write_held(self) -> None:
        """Write the rows held so far as a file (data file, or staged file for a MERGE) and drop
        them — unless the table cannot hold them yet (the job then reports the schema instead)."""
        if self.spec.table_metadata_json is None:
            return
        self._fit_deletes()
        try:
            schema = unify_schemas(self._row_schemas())
        except SchemaConflict:
            return  # reported by finish
        if self._needs_evolution(schema):
            # The job will report the schema and run again once the table holds it: from here on
            # this task keeps only the rows' schemas.
            self.schema_only = True
            self.batches = [b.slice(0, 0) for b in self.batches]
            self.held = 0
            return
        started, cpu = time.perf_counter(), time.process_time()
        if self.spec.stage_dir is not None:
            self.staged.append(self._stage())
        else:
            crash_point("table.task_write")  # kills the Spark Python worker, not the broker
            self.files.extend(self._write())
        self.timings["write"] += time.perf_counter() - started
        self.timings["write_cpu"] += time.process_time() - cpu
        self.written_rows += sum(b.num_rows for b in self.batches)
        self.batches = []
        self.held = 0

    def _row_schemas(self) -> list[pa.Schema]:
        """The batches' schemas as table columns (the staging-only delete marker left out).

        Batches of only deletes count only when no other batch has rows: their id columns are
        typed as the record key was, because no value told their type (``"7"`` for an integer
        ``id``), and unified with the values' types they made a conflict of a first cycle whose
        partitions had an insert in one and only a tombstone in another. Once the table exists
        :meth:`_fit_deletes` casts them to its types."""
        with_values: list[pa.Schema] = []
        deletes: list[pa.Schema] = []
        for batch in self.batches:
            index = batch.schema.get_field_index(DELETE_MARKER_COLUMN)
            schema = (batch.schema if index < 0 else batch.schema.remove(index)).remove_metadata()
            (deletes if _deletes_only(batch) else with_values).append(schema)
        return with_values or deletes

    def _fit_deletes(self) -> None:
        """Cast the id columns of tombstone-only batches (typed as the record key was, since no
        value told their type) to the table's types, so a batch of deletes evolves nothing."""
        if self.spec.table_metadata_json is None:
            return
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        target = schema_to_pyarrow(self.table_metadata.schema(), include_field_ids=False)
        for index, batch in enumerate(self.batches):
            if batch.schema.get_field_index(DELETE_MARKER_COLUMN) < 0:
                continue
            columns, names = [], []
            for field in batch.schema:
                column = batch.column(field.name)
                at = target.get_field_index(field.name)
                if at >= 0 and not pa.types.is_nested(field.type) and field.type != target.field(at).type:
                    try:
                        column = column.cast(target.field(at).type)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        pass  # reported by the schema check as the incompatible change it is
                columns.append(column)
                names.append(field.name)
            self.batches[index] = pa.RecordBatch.from_arrays(columns, names=names).replace_schema_metadata(
                batch.schema.metadata
            )

    def finish(self) -> Iterator[pa.RecordBatch]:
        self._fit_deletes()
        if self.skipped:
            yield _output("skipped", pickle.dumps(self.skipped), len(self.skipped))
        if self.batches:
            try:
                schema = unify_schemas(self._row_schemas())
            except SchemaConflict as exc:
                yield _output("fatal", message=f"topic {self.spec.topic}: {exc}")
                return
            if self.spec.table_metadata_json is None or self._needs_evolution(schema):
                # Another task's rows with values type the id columns better (see _row_schemas).
                deletes = all(_deletes_only(b) for b in self.batches)
                yield _output(
                    "schema",
                    schema.serialize().to_pybytes(),
                    self.rows,
                    DELETES_ONLY.decode() if deletes else "",
                )
            else:
                self._write_held()
        if self.staged and not self.batches:
            for index, path in enumerate(self.staged):
                # The row count goes with the first file: the job adds them up.
                yield _output("staged", path.encode(), self.written_rows if index == 0 else 0)
        elif self.files and not self.batches:
            yield _output("files", pickle.dumps(self.files), self.written_rows)
        stats = {
            **self.timings,
            "bytes": self.bytes_read,
            "max_timestamp_ms": self.newest,
            "tombstones": self.tombstones,
        }
        yield _output("stats", json.dumps(stats).encode(), self.rows)

    @cached_property
    def table_metadata(self) -> Any:
        """The table's metadata, parsed once per task (the schema check and the write both need it)."""
        from pyiceberg.table.metadata import TableMetadataUtil

        assert self.spec.table_metadata_json is not None
        return TableMetadataUtil.parse_raw(self.spec.table_metadata_json)

    def _needs_evolution(self, schema: pa.Schema) -> bool:
        from tabletopic.table.schema_evolution import IncompatibleSchemaChange, plan_schema_update

        try:
            return bool(plan_schema_update(self.table_metadata.schema(), schema))
        except IncompatibleSchemaChange:
            return True  # the coordinator reports the incompatibility with its full message

    def _conformed(self, field_ids: bool = False) -> pa.Table:
        """The accumulated rows reshaped to the table's current schema (with the Parquet field ids
        when ``field_ids``)."""
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        target = schema_to_pyarrow(self.table_metadata.schema(), include_field_ids=field_ids)
        return pa.Table.from_batches([conform_batch(b, target) for b in self.batches], schema=target)

    def _io(self) -> Any:
        from pyiceberg.io import load_file_io

        return load_file_io(self.spec.io_properties, self.table_metadata.location)

    def _stage(self) -> str:
        """Write the rows as one plain Parquet file for the upsert commit; returns its location. Every
        staged file has the delete marker column (false but for tombstones), so the commit reads one
        schema whichever files had tombstones."""
        import pyarrow.parquet as pq

        assert self.spec.stage_dir is not None
        path = f"{self.spec.stage_dir.rstrip('/')}/{uuid.uuid4()}.parquet"
        markers = []
        for batch in self.batches:
            index = batch.schema.get_field_index(DELETE_MARKER_COLUMN)
            markers.append(
                batch.column(index) if index >= 0 else pa.array([False] * batch.num_rows, pa.bool_())
            )
        table = self._conformed().append_column(
            pa.field(DELETE_MARKER_COLUMN, pa.bool_()), pa.chunked_array(markers, pa.bool_())
        )
        with self._io().new_output(path).create(overwrite=True) as stream:
            pq.write_table(table, stream)
        return path

    def _write(self) -> list[Any]:
        from pyiceberg.io.pyarrow import _dataframe_to_data_files

        from tabletopic.table import parquet_files

        if parquet_files.direct_write_supported(self.table_metadata):
            return parquet_files.write_data_files(self.table_metadata, self._io(), self._conformed(True))

        # pyiceberg names files ``00000-<n>-<write_uuid>.parquet`` with ``n`` counting from 0 in
        # every call, so tasks of one job sharing the job's uuid would all write (and overwrite) the
        # same path: each task needs a uuid of its own.
        return list(
            _dataframe_to_data_files(
                table_metadata=self.table_metadata,
                write_uuid=uuid.uuid4(),
                df=self._conformed(),
                io=self._io(),
            )
        )


def run_task(spec: JobSpec, item_json: Iterable[str]) -> Iterator[pa.RecordBatch]:
    """Convert the given items; the body of one Spark task."""
    task = IngestTask(spec)
    for text in item_json:
        fatal = task.add(WorkItem.from_json(text))
        if fatal is not None:
            yield fatal
            return
    yield from task.finish()


def collect_outputs(outputs: Iterable[pa.RecordBatch | dict[str, Any]]) -> JobResult:
    """Fold the tasks' output rows into one :class:`JobResult` (on the driver)."""
    result = JobResult()
    schemas: list[pa.Schema] = []
    delete_schemas: list[pa.Schema] = []  # from tasks that saw only deletes (see _row_schemas)
    for output in outputs:
        rows = output.to_pylist() if isinstance(output, pa.RecordBatch) else [output]
        for row in rows:
            kind = row["kind"]
            if kind == "staged":
                result.staged_paths.append(row["payload"].decode())
                result.rows += row["rows"]
            elif kind == "files":
                result.data_files.extend(pickle.loads(row["payload"]))
                result.rows += row["rows"]
            elif kind == "schema":
                schema = pa.ipc.read_schema(pa.py_buffer(row["payload"]))
                (delete_schemas if row["message"] == DELETES_ONLY.decode() else schemas).append(schema)
            elif kind == "skipped":
                result.skipped.extend(pickle.loads(row["payload"]))
            elif kind == "fatal":
                result.fatal_error = result.fatal_error or row["message"]
            elif kind == "stats":
                for name, value in json.loads(row["payload"]).items():
                    if name == "bytes":
                        result.bytes_read += int(value)
                    elif name == "tombstones":
                        result.tombstones += int(value)
                    elif name == "max_timestamp_ms":
                        if value is not None:
                            result.max_timestamp_ms = max(result.max_timestamp_ms or value, value)
                    else:
                        result.timings[name] = result.timings.get(name, 0.0) + float(value)
    schemas = schemas or delete_schemas
    if schemas:
        try:
            result.needs_schema = unify_schemas(schemas)
        except SchemaConflict as exc:
            result.fatal_error = result.fatal_error or str(exc)
        # Files written by other tasks of this run are orphans now; the job runs again after the
        # table schema changed. Maintenance removes orphan files.
        result.data_files = []
        result.staged_paths = []
        result.rows = 0
    return result


class InProcessRunner:
    """Runs the ingest task in this process, without Spark: for unit tests and tiny deployments."""

    def run(self, spec: JobSpec) -> JobResult:
        return collect_outputs(run_task(spec, [item.to_json() for item in spec.items]))


# Modules a task imports only when it first needs them (a format's decoder, the Parquet writer, the
# registry client): about 0.75 s per process, which a worker's first real job would otherwise pay.
TASK_MODULES = (
    "tabletopic.table.parquet_files",
    "tabletopic.table.schema_evolution",
    "tabletopic.schema_registry.client",
    "tabletopic.table.convert.avro",
    "tabletopic.table.convert.avro_columnar",
    "tabletopic.table.convert.native_avro",
    "tabletopic.table.convert.protobuf",
    "tabletopic.table.convert.protobuf_arrow",
    "tabletopic.table.convert.native_protobuf",
    "tabletopic.table.convert.jsonvalue",
    "tabletopic.table.convert.jsonschema_arrow",
    "tabletopic.table.convert.native_json",
)
# Datums decoded at a Spark worker's warm-up: about a chunk's worth (``table.job.max.task.bytes``
# / 4 of 100-byte records at the default), because the native Avro reader's first large read in a
# process costs about twice the later ones; the memory it takes is what the first chunk needs.
WARM_DATUMS = 160_000


def preload() -> None:
    """Import every module a task may need, so no job pays for it."""
    for name in TASK_MODULES:
        importlib.import_module(name)


def warm_worker(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A Spark task run once per core at warm-up, in a Python worker the ingest jobs reuse: the
    task's modules are imported and the native Avro reader has decoded a chunk-sized column."""
    from tabletopic.table.convert import native_avro

    preload()
    native_avro.warm(rows=WARM_DATUMS)
    yield from batches
