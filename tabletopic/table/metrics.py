"""Prometheus metrics of the table pipeline, per topic."""

from __future__ import annotations

import time
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Histogram

from tabletopic.table.coordinator import PipelineStatus
from tabletopic.table.job import JobResult


class TableMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        # Every metric here is per topic, in the node's registry.
        counter = partial(Counter, labelnames=["topic"], registry=registry)
        histogram = partial(Histogram, labelnames=["topic"], registry=registry)
        self.rows = counter("tabletopic_table_rows_committed", "Rows committed to Iceberg tables")
        self.bytes = counter("tabletopic_table_bytes_read", "Stored bytes the ingest jobs read")
        self.skipped = counter(
            "tabletopic_table_records_skipped",
            "Records skipped under errors.tolerance (and sent to the DLQ when set)",
        )
        self.commit_seconds = histogram(
            "tabletopic_table_commit_duration_seconds",
            "Plan + job + commit time of one ingest cycle",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
        )
        self.delay = histogram(
            "tabletopic_table_commit_delay_seconds",
            "Time from the newest record's timestamp to the commit that made it visible",
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900),
        )
        # Lag and freshness gauges are computed at scrape time: tabletopic.table.ops.lag.

    def committed(self, topic: str, job: JobResult, seconds: float) -> None:
        self.rows.labels(topic).inc(job.rows)
        self.bytes.labels(topic).inc(job.bytes_read)
        self.skipped.labels(topic).inc(len(job.skipped))
        self.commit_seconds.labels(topic).observe(seconds)
        if job.max_timestamp_ms is not None:
            self.delay.labels(topic).observe(max(time.time() - job.max_timestamp_ms / 1000, 0.0))

    def observe(self, status: PipelineStatus) -> None:
        """Nothing to do after a cycle: lag is read live by :class:`LiveLagCollector`."""
