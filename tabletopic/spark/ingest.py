"""The Spark ingest job: one ``mapInArrow`` stage over a small DataFrame of work items.

Each Spark task reads its items' object slices straight from object storage, decodes and converts
them (:mod:`tabletopic.table.ingest_task`) and writes Parquet data files; the driver collects file
descriptions and the coordinator commits them in one conditional Iceberg commit. Executors need only
object-store access (and the schema registry URL for schema-typed topics), never the broker.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from tabletopic.table.ingest_task import OUTPUT_DDL, collect_outputs, run_task
from tabletopic.table.job import JobResult, JobSpec
from tabletopic.table.worker import assign_items

log = logging.getLogger(__name__)


def _task_function(spec_blob: bytes) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec: JobSpec = pickle.loads(spec_blob)
        items = (
            text
            for batch in batches
            for group in batch.column("item").to_pylist()
            for text in json.loads(group)
        )
        yield from run_task(spec, items)

    return run


class SparkIngestRunner:
    """Runs ingest jobs on the process's Spark session (local[*] or a cluster)."""

    def __init__(self, session_factory: Callable[[], Any], max_tasks: int | None = None) -> None:
        self._session_factory = session_factory
        self._max_tasks = max_tasks

    def run(self, spec: JobSpec) -> JobResult:
        spark = self._session_factory()
        if not spec.items:
            return JobResult()
        # One task per core (or table.job.max.tasks), each with a group of items of about equal
        # stored bytes: a job lasts as long as its slowest task. createDataFrame spreads a local
        # list over defaultParallelism partitions, so with no more rows than that each group is a
        # task of its own; the rows are deserialised in the JVM (an RDD built in Python would add
        # a Python map in front of the task, with Python workers of its own to start).
        tasks = spark.sparkContext.defaultParallelism
        if self._max_tasks:
            tasks = min(tasks, self._max_tasks)
        groups = assign_items(spec.items, tasks)
        frame = spark.createDataFrame(
            [(json.dumps([item.to_json() for item in group]),) for group in groups], "item string"
        )
        # Items travel as rows; the rest of the spec (table metadata, settings) once per task.
        blob = pickle.dumps(JobSpec(**{**_fields(spec), "items": ()}))
        spark.sparkContext.setJobDescription(f"tabletopic ingest {spec.topic} ({len(spec.items)} items)")
        rows = frame.mapInArrow(_task_function(blob), OUTPUT_DDL).collect()
        return collect_outputs(row.asDict() for row in rows)


def _fields(spec: JobSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in spec.__dataclass_fields__}
