"""Samples the node's own metrics into the console's :class:`~tabletopic.api.timeseries.SeriesRing`.

One sample every ``admin.console.sample.interval.ms`` reads what the node already keeps in memory:
the Prometheus counters and gauges (rates from counter deltas), partition high watermarks, group
committed offsets and the table pipelines' status. No I/O, so it runs on the event loop.

Series names are ``kind|name|...|measure`` (``|`` because topic names may hold dots):
``node|produce_bytes_per_s``, ``node|produced_records_per_s``, ``node|consumed_records_per_s`` (as
groups commit), ``topic|orders|records_per_s``, ``group|g1|orders|0|lag``, ``group|g1|records_per_s``,
``table|orders|freshness_seconds``, ``storage|wal_bytes`` …. In a cluster, every broker's traffic
and every topic's bytes and records in and records consumed, as the brokers report them with their
leases (``cluster|bytes_in_per_s|broker_2``, ``cluster|records_in_per_s|broker_2``,
``cluster|records_per_s|consumed``, ``topic|orders|cluster_records_in_per_s``): a broker's own
counters cover only what it serves, and the console of any broker plots the whole cluster.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from tabletopic.api.sources import ConsoleSources
from tabletopic.api.timeseries import SeriesRing
from tabletopic.cluster.load import BYTES_IN, RECORDS_CONSUMED, RECORDS_IN, figure
from tabletopic.cluster.status_report import is_internal

if TYPE_CHECKING:
    from tabletopic.cluster.db import ClusterSnapshot

log = logging.getLogger(__name__)

# Counters sampled as per-second rates: series name -> Prometheus sample name.
NODE_RATES = {
    "node|produce_bytes_per_s": "tabletopic_broker_produce_bytes_total",
    "node|bytes_in_per_s": "tabletopic_broker_bytes_in_total",
    "node|bytes_out_per_s": "tabletopic_broker_bytes_out_total",
    "storage|upload_bytes_per_s": "tabletopic_s3stream_upload_bytes_total",
    "storage|object_read_bytes_per_s": "tabletopic_s3stream_object_read_bytes_total",
    "storage|compacted_bytes_per_s": "tabletopic_s3stream_compacted_bytes_total",
}
# Gauges sampled as they are.
NODE_GAUGES = {
    "node|connections": "tabletopic_broker_connections",
    "storage|wal_bytes": "tabletopic_s3stream_wal_bytes",
    "storage|cache_hit_ratio": "tabletopic_s3stream_cache_hit_ratio",
    "storage|compaction_backlog_objects": "tabletopic_s3stream_compaction_backlog_objects",
}


def sep(*parts: object) -> str:
    return "|".join(str(p) for p in parts)


def cluster_wide(series: str) -> bool:
    """A series of the whole cluster, the same on every broker (it is sampled from every broker's
    lease report), as opposed to what this broker alone counts. Topic names hold no ``|``."""
    return series.startswith("cluster|") or (series.startswith("topic|") and "|cluster_" in series)


def _cluster_traffic(snapshot: ClusterSnapshot) -> dict[str, float]:
    """Per second, as the live brokers last reported with their leases (the balancer's window):
    each broker's bytes in and out and records in; the cluster's records in and consumed (as groups
    commit); and each topic's bytes and records in and records consumed, summed over the brokers.
    The whole cluster, where a broker's own counters cover only what it serves."""
    values: dict[str, float] = {}
    # A broker leaves its idle partitions out of its report, so a topic nobody writes to is 0, not
    # a gap (its chart stopped at the last write). Internal topics are never reported: no series.
    topics = {topic: [0.0, 0.0, 0.0] for topic, _ in snapshot.partitions if not is_internal(topic)}
    records_in = consumed = 0.0
    for node in snapshot.nodes.values():
        if not node.alive:  # its last report is stale
            continue
        bytes_in, bytes_out = node.traffic()
        node_records_in = node.records_in()
        records_in += node_records_in
        broker = f"broker_{node.node_id}"
        values[sep("cluster", "bytes_in_per_s", broker)] = bytes_in
        values[sep("cluster", "bytes_out_per_s", broker)] = bytes_out
        values[sep("cluster", "records_in_per_s", broker)] = node_records_in
        for key, rates in node.load.items():
            topic = topics.setdefault(key.rpartition("/")[0], [0.0, 0.0, 0.0])
            topic[0] += figure(rates, BYTES_IN)
            topic[1] += figure(rates, RECORDS_IN)
            topic[2] += figure(rates, RECORDS_CONSUMED)
            consumed += figure(rates, RECORDS_CONSUMED)
    values[sep("cluster", "records_per_s", "in")] = records_in
    values[sep("cluster", "records_per_s", "consumed")] = consumed
    for name, (bytes_in, topic_records_in, topic_consumed) in topics.items():
        values[sep("topic", name, "cluster_bytes_in_per_s")] = bytes_in
        values[sep("topic", name, "cluster_records_in_per_s")] = topic_records_in
        values[sep("topic", name, "cluster_records_consumed_per_s")] = topic_consumed
    return values


class Sampler:
    """Turns the node's state into one sample of named values (rates need the previous sample)."""

    def __init__(self, sources: ConsoleSources, ring: SeriesRing) -> None:
        self.sources = sources
        self.ring = ring
        self._previous: dict[str, float] = {}
        self._previous_at: float | None = None
        self._previous_marks: dict[tuple[str, int], int] = {}
        self._previous_marks_at: float | None = None

    def sample(self, now: float | None = None) -> dict[str, float]:
        """Read everything once and record it; returns what was recorded."""
        now = time.time() if now is None else now
        totals: dict[str, float] = {}  # cumulative values turned into rates below
        values: dict[str, float] = {}
        src = self.sources
        for series, metric in NODE_RATES.items():
            got = src.metric(metric)
            if got is not None:
                totals[series] = got
        for series, metric in NODE_GAUGES.items():
            got = src.metric(metric)
            if got is not None:
                values[series] = got
        service = src.broker_service()
        high_watermarks: dict[tuple[str, int], int] = {}
        if service is not None:
            led: dict[tuple[str, int], int] = {}
            for topic in service.topics.all():
                offsets = service.partition_offsets(topic)
                for partition, (_start, end) in enumerate(offsets):
                    high_watermarks[(topic.name, partition)] = end
                    if service.leadership.leads(topic.name, partition):
                        led[(topic.name, partition)] = end
            values.update(self._produced(now, led))
        snapshot = src.cluster_snapshot()
        if snapshot is not None:
            values.update(_cluster_traffic(snapshot))
        groups = src.groups()
        if groups is not None and groups.ready:
            # Consumption as consumer groups commit it: records/s of committed-offset progress.
            consumed = 0
            for group_id in groups.group_ids():
                _error, committed = groups.fetch_offsets(group_id, None)
                group_total = sum(o.offset for _, parts in committed for _, o in parts if o is not None)
                consumed += group_total
                totals[sep("group", group_id, "records_per_s")] = float(group_total)
                for topic_name, partitions in committed:
                    for partition, offset in partitions:
                        mark = high_watermarks.get((topic_name, partition))
                        if offset is not None and mark is not None:
                            values[sep("group", group_id, topic_name, partition, "lag")] = max(
                                mark - offset.offset, 0
                            )
            totals["node|consumed_records_per_s"] = float(consumed)
        for topic_name, pipeline in src.pipelines().items():
            status = pipeline.status
            if not status.facts_loaded:
                # After a restart a pipeline knows neither its committed offsets nor its rows until
                # it has read its table: lag would be the whole log and rows/s the whole table.
                continue
            values[sep("table", topic_name, "freshness_seconds")] = float(status.lag_seconds)
            values[sep("table", topic_name, "lag_records")] = float(status.lag_records)
            totals[sep("table", topic_name, "rows_per_s")] = float(status.rows_committed)
        values.update(self._rates(now, totals))
        self.ring.record(now, values)
        return values

    def _produced(self, now: float, led: dict[tuple[str, int], int]) -> dict[str, float]:
        """Records produced per second, per topic and for the node, from the high watermarks of the
        partitions this broker led at both samples. A partition gained meanwhile (a failover, a
        move, a restart reading its log back) adds nothing that interval: its whole log would
        otherwise show as a spike of records produced."""
        rates: dict[str, float] = {}
        before, before_at = self._previous_marks, self._previous_marks_at
        self._previous_marks, self._previous_marks_at = led, now
        if before_at is None or now <= before_at:
            return rates
        elapsed = now - before_at
        by_topic: dict[str, int] = {}
        for (topic, partition), end in led.items():
            by_topic.setdefault(topic, 0)
            previous = before.get((topic, partition))
            if previous is not None and end >= previous:
                by_topic[topic] += end - previous
        for topic, produced in by_topic.items():
            rates[sep("topic", topic, "records_per_s")] = produced / elapsed
        rates["node|produced_records_per_s"] = sum(by_topic.values()) / elapsed
        return rates

    def _rates(self, now: float, totals: dict[str, float]) -> dict[str, float]:
        rates: dict[str, float] = {}
        if self._previous_at is not None and now > self._previous_at:
            elapsed = now - self._previous_at
            for name, total in totals.items():
                before = self._previous.get(name)
                if before is not None and total >= before:  # a reset (restart, deletion) skips one
                    rates[name] = (total - before) / elapsed
        self._previous, self._previous_at = totals, now
        return rates

    async def run(self, interval_s: float) -> None:
        """Sample every ``interval_s`` until cancelled; a failing sample is logged, never fatal."""
        failures = 0
        while True:
            try:
                self.sample()
                failures = 0
            except Exception:
                failures += 1
                if failures == 1:  # once per streak, not every few seconds
                    log.exception("console metrics sample failed (the plots will have a gap)")
            await asyncio.sleep(interval_s)
