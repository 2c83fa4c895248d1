"""The ``SchemaLookup`` implementations the table pipeline uses: in-process and over HTTP, cached."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tabletopic import database
from tabletopic.config import Config
from tabletopic.schema_registry.client import CachedSchemaLookup, HttpSchemaLookup
from tabletopic.schema_registry.lookup import SchemaNotFound
from tabletopic.schema_registry.model import SchemaSubmission
from tabletopic.schema_registry.opening import build_registry
from tabletopic.schema_registry.registry import SchemaRegistry
from tests.support.registry_process import RegistryProcess

ADDRESS = json.dumps({"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]})
PERSON = json.dumps({"type": "record", "name": "Person", "fields": [{"name": "home", "type": "Address"}]})


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[SchemaRegistry]:
    engine = database.create_engine(database.default_url(tmp_path))
    registry = build_registry(engine, Config({}))
    yield registry
    registry.close()
    engine.dispose()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_in_process_lookup_resolves_references_and_caches_by_id(registry: SchemaRegistry) -> None:
    from tabletopic.schema_registry.formats.base import SchemaReference

    registry.register("address", SchemaSubmission(ADDRESS))
    references = (SchemaReference("Address", "address", 1),)
    person_id, _ = registry.register("person", SchemaSubmission(PERSON, references=references))
    lookup = CachedSchemaLookup(registry)
    with pytest.raises(SchemaNotFound):
        lookup.by_id(999)
    found = lookup.by_id(person_id)
    assert found.schema_type == "AVRO"
    assert found.references == (("Address", json.dumps(json.loads(ADDRESS), separators=(",", ":"))),)

    def unreachable(_schema_id: int) -> None:
        raise AssertionError("by-id lookups must be served from the cache")

    registry.registered_by_id = unreachable  # type: ignore[method-assign,assignment]
    assert lookup.by_id(person_id) is found


def test_latest_is_cached_for_the_ttl_only(registry: SchemaRegistry) -> None:
    clock = Clock()
    lookup = CachedSchemaLookup(registry, latest_ttl_s=1.0, clock=clock)
    registry.register("s", SchemaSubmission(ADDRESS))
    assert lookup.latest("s").version == 1
    changed = SchemaSubmission(
        json.dumps(
            {
                "type": "record",
                "name": "Address",
                "fields": [
                    {"name": "city", "type": "string"},
                    {"name": "zip", "type": "string", "default": ""},
                ],
            }
        )
    )
    registry.register("s", changed)
    assert lookup.latest("s").version == 1
    clock.now = 1.5
    assert lookup.latest("s").version == 2
    with pytest.raises(SchemaNotFound):
        lookup.latest("nosuch")


@pytest.mark.integration
def test_http_lookup_reads_a_registry_url(registry_server: RegistryProcess) -> None:
    import httpx

    httpx.post(f"{registry_server.url}/subjects/lookup-address/versions", json={"schema": ADDRESS})
    body = {"schema": PERSON, "references": [{"name": "Address", "subject": "lookup-address", "version": 1}]}
    person_id = httpx.post(f"{registry_server.url}/subjects/lookup-person/versions", json=body).json()["id"]
    lookup = HttpSchemaLookup(registry_server.url)
    try:
        found = lookup.by_id(person_id)
        assert dict(found.references)["Address"] == json.dumps(json.loads(ADDRESS), separators=(",", ":"))
        latest = lookup.latest("lookup-person")
        assert (latest.schema_id, latest.version, latest.subject) == (person_id, 1, "lookup-person")
        with pytest.raises(SchemaNotFound):
            lookup.by_id(123456)
    finally:
        lookup.close()


def test_http_lookup_reports_a_dead_registry_after_bounded_retries() -> None:
    import httpx

    from tests.support.ports import free_port

    lookup = HttpSchemaLookup(f"http://127.0.0.1:{free_port()}", timeout_s=1.0)
    try:
        with pytest.raises(httpx.TransportError):
            lookup.by_id(1)
    finally:
        lookup.close()


def test_concurrent_registrations_and_reads_on_sqlite_neither_fail_nor_clash(
    registry: SchemaRegistry,
) -> None:
    import threading

    errors: list[BaseException] = []
    ids: dict[str, int] = {}
    lock = threading.Lock()

    def worker(n: int) -> None:
        try:
            for i in range(8):
                name = f"T{n}_{i}"
                text = json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]})
                schema_id, _ = registry.register(f"s{n}", SchemaSubmission(text, normalize=False))
                with lock:
                    ids[name] = schema_id
                assert registry.registered_by_id(schema_id).schema_id == schema_id
                registry.registered_latest(f"s{n}")
        except BaseException as exc:
            errors.append(exc)

    registry.set_level(None, "NONE")
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert sorted(ids.values()) == list(range(1, 49))
