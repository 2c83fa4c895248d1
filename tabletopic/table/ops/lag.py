"""Lag of a table topic measured when asked: records behind the stream's real high watermark and
the age of the oldest record not yet committed to the table.

The high watermark is the store's confirmed end offset (in memory, exact at the moment of the
call). The oldest waiting record's timestamp is read from the header of its stored batch (the first
record's CreateTime, or the batch's LogAppendTime) and cached per (partition, committed offset):
it only changes when a commit moves the committed offset. The coordinator refreshes it every poll;
the admin API refreshes it before answering; the Prometheus collector reads high watermarks live
and the cached timestamps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tabletopic.table.ports import TopicView
from tabletopic.table.worker import TableWorker

log = logging.getLogger(__name__)


class LagStatus(Protocol):
    """The part of a pipeline's status (``table.coordinator.PipelineStatus``) lag is measured in;
    a Protocol because the coordinator, which owns the status, calls these functions."""

    high_watermarks: dict[int, int]
    log_starts: dict[int, int]
    oldest_waiting: dict[int, tuple[int, int]]  # partition -> (first waiting offset, its timestamp)

    def first_waiting_offset(self, partition: int) -> int:
        """The first offset of ``partition`` not committed to the table yet."""
        ...

    @property
    def lag_records(self) -> int: ...

    def lag_seconds_at(self, now: float) -> float:
        """Age of the oldest waiting record at ``now``; 0 when caught up."""
        ...


class HasLagStatus(Protocol):
    @property
    def status(self) -> LagStatus: ...


PipelineT = TypeVar("PipelineT", bound=HasLagStatus)


def record_high_watermarks(worker: TableWorker, view: TopicView, status: LagStatus) -> None:
    """Set ``status.high_watermarks`` (and log starts) from the store, now."""
    marks: dict[int, int] = {}
    starts: dict[int, int] = {}
    for p in view.partitions:
        try:
            marks[p.partition] = worker.high_watermark(p.stream_id)
            starts[p.partition] = worker.log_start(p.stream_id)
        except Exception:  # a partition deleted under us; the next cycle sees the new layout
            continue
    status.high_watermarks = marks
    status.log_starts = starts


async def refresh_oldest_waiting(worker: TableWorker, view: TopicView, status: LagStatus) -> None:
    """Fill ``status.oldest_waiting`` for every partition with records not yet committed."""
    record_high_watermarks(worker, view, status)
    streams = {p.partition: p.stream_id for p in view.partitions}
    oldest: dict[int, tuple[int, int]] = {}
    for partition, end in status.high_watermarks.items():
        first = status.first_waiting_offset(partition)
        if first >= end:
            continue
        cached = status.oldest_waiting.get(partition)
        if cached is not None and cached[0] == first:
            oldest[partition] = cached
            continue
        try:
            stamp = await worker.timestamp_at(streams[partition], first)
        except Exception as exc:  # trimmed meanwhile, or an unreadable batch: no age for now
            log.debug("topic %s partition %d: no timestamp at %d: %s", view.name, partition, first, exc)
            continue
        if stamp is not None and stamp >= 0:
            oldest[partition] = (first, stamp)
    status.oldest_waiting = oldest


class LiveLagCollector(Collector, Generic[PipelineT]):
    """``tabletopic_table_lag_records`` and ``tabletopic_table_freshness_seconds`` computed at scrape
    time from the live high watermarks (not from the last cycle's view)."""

    def __init__(
        self,
        pipelines: Callable[[], Mapping[str, PipelineT]],
        refresh: Callable[[PipelineT], None],
    ) -> None:
        self._pipelines = pipelines
        self._refresh = refresh

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "tabletopic_table_lag_records",
            "Records acknowledged (below the high watermark) but not yet committed to the table",
            labels=["topic"],
        )
        age = GaugeMetricFamily(
            "tabletopic_table_freshness_seconds",
            "Age of the oldest record not yet committed to the table; 0 when caught up",
            labels=["topic"],
        )
        now = time.time()
        for name, pipeline in sorted(self._pipelines().items()):
            try:
                self._refresh(pipeline)
            except Exception:  # a scrape must never fail on one topic
                log.debug("topic %s: high watermarks unavailable", name, exc_info=True)
            lag.add_metric([name], pipeline.status.lag_records)
            age.add_metric([name], pipeline.status.lag_seconds_at(now))
        yield lag
        yield age
