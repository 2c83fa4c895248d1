""":class:`~tabletopic.schema_registry.lookup.SchemaLookup` implementations for the table pipeline.

:class:`CachedSchemaLookup` runs in the node, over the registry itself; :class:`HttpSchemaLookup`
runs in Spark executors and talks to any Confluent-compatible registry URL. Both cache schemas by id
until evicted by size (an id's schema never changes) and the latest version of a subject for a short
TTL (it changes whenever someone registers).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from prometheus_client import CollectorRegistry, Counter

from tabletopic.schema_registry.formats.base import SchemaType
from tabletopic.schema_registry.lookup import RegisteredSchema, SchemaNotFound
from tabletopic.schema_registry.lru import LRU
from tabletopic.schema_registry.registry import SchemaRegistry


class _Caches:
    """By-id LRU plus latest-by-subject TTL map, thread-safe (Spark runs decoders in threads)."""

    def __init__(self, latest_ttl_s: float, max_entries: int, clock: Callable[[], float]) -> None:
        self.latest_ttl_s = latest_ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self.by_id: LRU[int, RegisteredSchema] = LRU(max_entries)
        self.latest: dict[str, tuple[float, RegisteredSchema]] = {}
        self.lock = threading.Lock()

    def get_latest(self, subject: str) -> RegisteredSchema | None:
        with self.lock:
            entry = self.latest.get(subject)
            if entry is None or self.clock() - entry[0] > self.latest_ttl_s:
                return None
            return entry[1]

    def put_latest(self, subject: str, found: RegisteredSchema) -> None:
        with self.lock:
            if len(self.latest) >= self.max_entries:
                self.latest.clear()
            self.latest[subject] = (self.clock(), found)


class _CachingLookup:
    def __init__(
        self,
        latest_ttl_s: float = 1.0,
        max_entries: int = 10000,
        metrics: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._caches = _Caches(latest_ttl_s, max_entries, clock)
        self._hits: Counter | None = None
        self._misses: Counter | None = None
        if metrics is not None:
            self._hits = Counter(
                "tabletopic_schema_lookup_cache_hits", "Schema lookups served from cache", registry=metrics
            )
            self._misses = Counter(
                "tabletopic_schema_lookup_cache_misses",
                "Schema lookups that went to the registry",
                registry=metrics,
            )

    def _count(self, hit: bool) -> None:
        counter = self._hits if hit else self._misses
        if counter is not None:
            counter.inc()

    def by_id(self, schema_id: int) -> RegisteredSchema:
        found = self._caches.by_id.get(schema_id)
        self._count(found is not None)
        if found is None:
            found = self._fetch_id(schema_id)
            self._caches.by_id.put(found.schema_id, found)
        return found

    def latest(self, subject: str) -> RegisteredSchema:
        found = self._caches.get_latest(subject)
        self._count(found is not None)
        if found is None:
            found = self._fetch_latest(subject)
            self._caches.put_latest(subject, found)
        return found

    def _fetch_id(self, schema_id: int) -> RegisteredSchema:  # pragma: no cover - abstract
        raise NotImplementedError

    def _fetch_latest(self, subject: str) -> RegisteredSchema:  # pragma: no cover - abstract
        raise NotImplementedError


class CachedSchemaLookup(_CachingLookup):
    """The in-process lookup: straight to the registry's database, cached."""

    def __init__(self, registry: SchemaRegistry, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.registry = registry

    def _fetch_id(self, schema_id: int) -> RegisteredSchema:
        return self.registry.registered_by_id(schema_id)

    def _fetch_latest(self, subject: str) -> RegisteredSchema:
        return self.registry.registered_latest(subject)


class HttpSchemaLookup(_CachingLookup):
    """A lookup against a registry URL (for Spark executors, which have no metadata DB).

    References are resolved by fetching each referenced subject/version, transitively, so the
    result is what a decoder needs just like the in-process one.
    """

    def __init__(self, url: str, timeout_s: float = 10.0, **kwargs: Any) -> None:
        import httpx

        super().__init__(**kwargs)
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url, timeout=timeout_s, headers={"Accept": "application/vnd.schemaregistry.v1+json"}
        )

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str) -> Any:
        import httpx

        # A registry restarting behind a load balancer drops a connection now and then; a task
        # failing for that would redo all its work, so transport errors get two more tries.
        for attempt in range(3):
            try:
                response = self._http.get(path)
                break
            except httpx.TransportError:
                if attempt == 2:
                    raise
                time.sleep(0.2 * (attempt + 1))
        if response.status_code == 404:
            raise SchemaNotFound(response.text)
        response.raise_for_status()
        return response.json()

    def _references(self, refs: list[dict[str, Any]], into: dict[str, str]) -> None:
        for ref in refs:
            name = ref["name"]
            if name in into:
                continue
            body = self._get(f"/subjects/{quote(ref['subject'], safe='')}/versions/{ref['version']}")
            self._references(body.get("references") or [], into)
            into[name] = body["schema"]

    def _build(self, body: dict[str, Any], schema_id: int, subject: str | None) -> RegisteredSchema:
        resolved: dict[str, str] = {}
        self._references(body.get("references") or [], resolved)
        return RegisteredSchema(
            schema_id=schema_id,
            schema_type=body.get("schemaType", SchemaType.AVRO.value),
            schema=body["schema"],
            references=tuple(resolved.items()),
            subject=subject,
            version=body.get("version"),
        )

    def _fetch_id(self, schema_id: int) -> RegisteredSchema:
        return self._build(self._get(f"/schemas/ids/{schema_id}"), schema_id, None)

    def _fetch_latest(self, subject: str) -> RegisteredSchema:
        body = self._get(f"/subjects/{quote(subject, safe='')}/versions/latest")
        return self._build(body, int(body["id"]), subject)
