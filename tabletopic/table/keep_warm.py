"""Keeps Spark's Python workers alive between ingest jobs.

Spark stops every idle Python worker once its worker factory has seen no activity for a minute
(``PythonWorkerFactory``'s idle timeout, fixed in Spark 3.5, not a setting). With small jobs running
in the node's helper process (:mod:`tabletopic.table.job_process`), Spark is idle most of the time,
so the first large job after a quiet minute — a backlog after a producer burst, a topic switched on
— would start new workers and pay the task's imports and the native decoders' first large read again
(about a second of a 3-second catch-up of a million records). A task that does nothing, run when
no job is active every ``interval`` seconds (less than the timeout), counts as activity: its cost is
one trivial Spark job (tens of milliseconds of CPU) per interval, and the workers' memory stays
taken as it was after the warm-up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

log = logging.getLogger(__name__)

# Spark's idle timeout is 60 s, checked every 10 s: 40 s leaves room for a slow job submission.
INTERVAL_S = 40.0


def idle_task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The keep-warm task: reuses an idle worker and gives back what it got."""
    yield from batches


class WorkerKeeper:
    """Runs :func:`idle_task` on ``spark()`` every ``interval`` seconds unless a job is running."""

    def __init__(self, spark: Callable[[], Any], interval: float = INTERVAL_S) -> None:
        self._spark = spark
        self._interval = interval
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="spark-keep-warm", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _loop(self) -> None:
        failed = False
        while not self._stopped.wait(self._interval):
            try:
                spark = self._spark()
                context = spark.sparkContext
                if context.statusTracker().getActiveJobsIds():
                    continue  # a job keeps the workers busy, hence alive
                context.setJobDescription("tabletopic: keep Python workers warm")
                spark.createDataFrame([("",)], "item string").mapInArrow(idle_task, "item string").collect()
                failed = False
            except Exception as exc:  # Spark stopping or restarting: try again next interval
                if not failed:
                    log.warning("keeping Spark's Python workers warm failed (retried every %.0f s): %s",
                                self._interval, exc)  # fmt: skip
                failed = True
