"""Concurrent registrations share transactions and commits: each caller still gets its own answer,
a refused registration leaves nothing behind, and versions stay contiguous."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from tabletopic.config import Config
from tabletopic.schema_registry import db
from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.model import SchemaSubmission
from tabletopic.schema_registry.opening import open_registry


def schema(version: int, breaking: bool = False) -> SchemaSubmission:
    last = {"name": f"x{version}", "type": ["null", "string"], "default": None}
    if breaking:
        last = {"name": f"y{version}", "type": "string"}  # required, no default: BACKWARD fails
    fields = [{"name": "a", "type": "int"}, last]
    return SchemaSubmission(json.dumps({"type": "record", "name": "R", "fields": fields}))


@pytest.mark.timeout(120)
def test_concurrent_registrations_each_get_their_own_answer(tmp_path: Path) -> None:
    engine, registry = open_registry(Config({"data.dir": str(tmp_path)}))
    refused: list[int] = []
    errors: list[BaseException] = []
    results: dict[tuple[int, int], tuple[int, int]] = {}

    def worker(thread: int) -> None:
        try:
            for i in range(15):
                subject = f"t{thread}-value"
                if i % 5 == 4:  # an incompatible one now and then, in the same batches as others
                    try:
                        registry.register(subject, schema(100 * thread + i, breaking=True))
                    except RegistryError as exc:
                        assert exc.error is ErrorCode.INCOMPATIBLE_SCHEMA
                        refused.append(thread)
                    continue
                results[(thread, i)] = registry.register(subject, schema(100 * thread + i))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(100)
        assert not errors, errors
        assert len(refused) == 6 * 3
        for thread in range(6):
            assert registry.versions(f"t{thread}-value") == list(range(1, 13))
        ids = [schema_id for schema_id, _version in results.values()]
        assert len(set(ids)) == len(ids) == 6 * 12
        with engine.connect() as conn:
            stored = conn.execute(sa.select(sa.func.count()).select_from(db.schemas_table)).scalar()
        assert stored == len(ids)  # refused registrations left no schema row behind
        # Registering any of them again answers the same id and version.
        assert registry.register("t0-value", schema(0)) == results[(0, 0)]
    finally:
        registry.close()
        engine.dispose()


def test_a_refused_write_in_a_batch_is_undone_and_the_others_commit(tmp_path: Path) -> None:
    engine, registry = open_registry(Config({"data.dir": str(tmp_path)}))
    gate = threading.Event()

    def blocker(conn: sa.Connection) -> str:
        gate.wait(10)  # holds the batch open until the others have queued behind it
        db.insert_version(conn, "kept-a", 1, 1)
        return "a"

    def refused(conn: sa.Connection) -> str:
        db.insert_version(conn, "gone", 1, 1)
        raise RegistryError(ErrorCode.OPERATION_NOT_PERMITTED, "no")

    def kept(conn: sa.Connection) -> str:
        db.insert_version(conn, "kept-b", 1, 1)
        return "b"

    answers: dict[str, object] = {}

    def call(name: str, fn: object) -> None:
        try:
            answers[name] = registry._write_grouped(fn)  # type: ignore[arg-type]
        except RegistryError as exc:
            answers[name] = exc

    try:
        first = threading.Thread(target=call, args=("blocker", blocker))
        first.start()
        others = [
            threading.Thread(target=call, args=(n, f)) for n, f in (("refused", refused), ("kept", kept))
        ]
        for t in others:
            t.start()
        gate.set()
        for t in [first, *others]:
            t.join(30)
        assert answers["blocker"] == "a" and answers["kept"] == "b"
        assert isinstance(answers["refused"], RegistryError)
        assert registry.subjects() == ["kept-a", "kept-b"]
    finally:
        registry.close()
        engine.dispose()
