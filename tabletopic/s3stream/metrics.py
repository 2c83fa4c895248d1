"""Prometheus metrics of the storage engine, registered on the registry the caller passes (the
platform's, so they appear on the admin API's /metrics)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class StoreMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.registry = registry
        self.appends = Counter("s3stream_appends", "Batches appended.", registry=registry)
        self.append_bytes = Counter("s3stream_append_bytes", "Payload bytes appended.", registry=registry)
        self.wal_fsync_seconds = Histogram(
            "s3stream_wal_fsync_seconds",
            "Duration of one local WAL group fsync.",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.wal_bytes = Gauge("s3stream_wal_bytes", "Bytes held by the local WAL.", registry=registry)
        self.upload_seconds = Histogram(
            "s3stream_upload_seconds",
            "Duration of one upload (objects stored and committed).",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.upload_bytes = Counter("s3stream_upload_bytes", "Bytes uploaded as objects.", registry=registry)
        self.cache_requests = Counter(
            "s3stream_cache_requests", "Reads by cache and outcome.", ["cache", "result"], registry=registry
        )
        self.cache_hit_ratio = Gauge(
            "s3stream_cache_hit_ratio",
            "Share of reads served from memory (log or block cache).",
            registry=registry,
        )
        self.object_reads = Counter(
            "s3stream_object_read_bytes", "Bytes read from object storage by fetches.", registry=registry
        )
        self.compaction_backlog = Gauge(
            "s3stream_compaction_backlog_objects",
            "Objects waiting to be compacted or deleted.",
            registry=registry,
        )
        self.compacted_bytes = Counter(
            "s3stream_compacted_bytes", "Bytes rewritten by compaction.", registry=registry
        )
        self.deleted_objects = Counter(
            "s3stream_deleted_objects", "Objects deleted from the store.", registry=registry
        )
        self._hits = 0
        self._reads = 0
        self.cache_hit_ratio.set_function(self._ratio)

    def _ratio(self) -> float:
        return self._hits / self._reads if self._reads else 1.0

    def cache_read(self, cache: str, hit: bool) -> None:
        self._reads += 1
        self._hits += hit
        self.cache_requests.labels(cache, "hit" if hit else "miss").inc()

    def gauge_from(self, gauge: Gauge, fn: Callable[[], float]) -> None:
        gauge.set_function(fn)
