"""The keep-warm loop against a fake Spark: a no-op job every interval unless a job is running;
failures logged once. (Real Spark runs it in every node test that warms Spark.)"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from tabletopic.table.keep_warm import WorkerKeeper, idle_task
from tests.support.cluster import wait_until


class FakeSpark:
    def __init__(self) -> None:
        self.active: list[int] = []
        self.jobs = 0
        self.fail = False
        self.sparkContext = self

    def statusTracker(self) -> Any:
        return self

    def getActiveJobsIds(self) -> list[int]:
        return self.active

    def setJobDescription(self, text: str) -> None:
        pass

    def createDataFrame(self, rows: Any, schema: str) -> Any:
        if self.fail:
            raise RuntimeError("SparkContext was shut down")
        return self

    def mapInArrow(self, function: Any, schema: str) -> Any:
        assert function is idle_task
        return self

    def collect(self) -> list[Any]:
        self.jobs += 1
        return []


def test_a_no_op_job_runs_every_interval_only_while_no_job_is_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spark = FakeSpark()
    keeper = WorkerKeeper(lambda: spark, interval=0.02)
    keeper.start()
    try:
        wait_until(lambda: spark.jobs >= 3, timeout=5, interval=0.01)
        spark.active = [7]  # an ingest job keeps the workers busy: nothing to add
        time.sleep(0.1)  # the subject from here on: intervals pass (5 each) and nothing runs
        before = spark.jobs
        time.sleep(0.1)  # (the subject)
        assert spark.jobs == before
        spark.active, spark.fail = [], True
        caplog.set_level(logging.WARNING, logger="tabletopic.table.keep_warm")
        time.sleep(0.2)  # the subject: 10 failing intervals, logged once, not ten times
        assert len([r for r in caplog.records if "keep" in r.getMessage()]) == 1  # logged once
        spark.fail = False
        wait_until(lambda: spark.jobs > before, timeout=5, interval=0.01)
    finally:
        keeper.stop()
    time.sleep(0.1)  # the subject: intervals pass after stop() and nothing runs
    stopped_at = spark.jobs
    time.sleep(0.1)  # (the subject)
    assert spark.jobs == stopped_at
    assert list(idle_task(iter([1, 2]))) == [1, 2]
