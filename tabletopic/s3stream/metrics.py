"""Prometheus metrics of the storage engine, registered on the registry the caller passes (the
platform's, so they appear on the admin API's /metrics). Named ``tabletopic_s3stream_*`` like every
other metric of a node (``tabletopic_<part>_*``); they were ``s3stream_*`` before (see docs/metrics.md)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "tabletopic_s3stream_"
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class StoreMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.registry = registry

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(PREFIX + name, doc, labels, registry=registry)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(PREFIX + name, doc, registry=registry)

        def latency(name: str, doc: str) -> Histogram:
            return Histogram(PREFIX + name, doc, buckets=_LATENCY_BUCKETS, registry=registry)

        self.appends = counter("appends", "Batches appended.")
        self.append_bytes = counter("append_bytes", "Payload bytes appended.")
        self.wal_fsync_seconds = latency("wal_fsync_seconds", "Duration of one local WAL group fsync.")
        self.wal_bytes = gauge("wal_bytes", "Bytes held by the local WAL.")
        self.upload_seconds = latency(
            "upload_seconds", "Duration of one upload (objects stored and committed)."
        )
        self.upload_phase_seconds = Histogram(
            PREFIX + "upload_phase_seconds",
            "Time an upload spends in each phase: `reserve` (object keys in the metadata DB), "
            "`build`, `put`, `turn` (waiting for earlier uploads to commit, object WAL) and `commit`.",
            ["phase"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.upload_bytes = counter("upload_bytes", "Bytes uploaded as objects.")
        self.cache_requests = counter("cache_requests", "Reads by cache and outcome.", "cache", "result")
        self.cache_hit_ratio = gauge(
            "cache_hit_ratio", "Share of reads served from memory (log or block cache)."
        )
        self.object_reads = counter("object_read_bytes", "Bytes read from object storage by fetches.")
        self.compaction_backlog = gauge(
            "compaction_backlog_objects", "Objects waiting to be compacted or deleted."
        )
        self.compacted_bytes = counter("compacted_bytes", "Bytes rewritten by compaction.")
        self.deleted_objects = counter("deleted_objects", "Objects deleted from the store.")
        self._hits = 0
        self._reads = 0
        self._cache_children: dict[tuple[str, bool], Counter] = {}
        self.cache_hit_ratio.set_function(self._ratio)

    def _ratio(self) -> float:
        return self._hits / self._reads if self._reads else 1.0

    def cache_read(self, cache: str, hit: bool) -> None:
        self._reads += 1
        self._hits += hit
        child = self._cache_children.get((cache, hit))
        if child is None:  # labels() takes a lock and builds a key: once per cache and outcome
            child = self._cache_children[cache, hit] = self.cache_requests.labels(
                cache, "hit" if hit else "miss"
            )
        child.inc()
