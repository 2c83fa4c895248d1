"""Several nodes serving the registry from one PostgreSQL database never clash on ids or versions."""

from __future__ import annotations

import json
import threading

import pytest

from tabletopic import database
from tabletopic.config import Config
from tabletopic.schema_registry.model import SchemaSubmission
from tabletopic.schema_registry.opening import build_registry
from tabletopic.schema_registry.registry import SchemaRegistry

pytestmark = pytest.mark.postgres


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]})


def test_concurrent_registrations_from_two_nodes_get_distinct_stable_ids(postgres_url: str) -> None:
    config = Config({"schema.registry.compatibility.level": "NONE"})
    engines = [database.create_engine(postgres_url) for _ in range(2)]
    nodes: list[SchemaRegistry] = [build_registry(engine, config) for engine in engines]
    results: list[tuple[str, str, int, int]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(node: SchemaRegistry, worker_id: int) -> None:
        try:
            for i in range(12):
                # Every worker registers the same shared schemas (one id each, whoever wins) into
                # one shared subject, plus schemas of its own into a subject of its own.
                shared = f"Shared{i % 4}"
                own = f"Own{worker_id}_{i}"
                for subject, name in (("shared", shared), (f"w{worker_id}", own)):
                    schema_id, version = node.register(subject, SchemaSubmission(schema(name)))
                    with lock:
                        results.append((subject, name, schema_id, version))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(nodes[i % 2], i)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert not errors, errors
        ids_by_name: dict[str, set[int]] = {}
        for _subject, name, schema_id, _version in results:
            ids_by_name.setdefault(name, set()).add(schema_id)
        assert all(len(ids) == 1 for ids in ids_by_name.values()), ids_by_name
        all_ids = [next(iter(ids)) for ids in ids_by_name.values()]
        assert len(all_ids) == len(set(all_ids)) == 4 + 6 * 12
        assert nodes[0].versions("shared") == [1, 2, 3, 4]
        for worker_id in range(6):
            assert nodes[1].versions(f"w{worker_id}") == list(range(1, 13))
        assert max(all_ids) == len(all_ids)  # no id burnt by a lost race
    finally:
        for engine in engines:
            engine.dispose()
