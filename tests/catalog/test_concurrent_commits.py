"""Two writers committing to one table through the built-in REST catalog: exactly one wins each round,
the loser gets 409 CommitFailedException and retries, and no snapshot is lost."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException

from tests.support.catalog_fixtures import CatalogFactory

pytestmark = pytest.mark.timeout(180)

SCHEMA = pa.schema([("writer", pa.string()), ("n", pa.int64())])
# pyiceberg retries conflicting appends on its own; switch that off so the test sees every 409 itself.
NO_CLIENT_RETRY = {"commit.retry.num-retries": "0"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backing_values(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "postgres":
        return {"metadata.url": request.getfixturevalue("postgres_url")}
    return {}


def test_stale_writer_gets_commit_failed_and_succeeds_after_refresh(
    make_catalog: CatalogFactory, backing_values: dict[str, Any]
) -> None:
    handle = make_catalog(backing_values)
    first, second = handle.rest_client(), handle.rest_client()
    first.create_namespace("db")
    first.create_table("db.t", SCHEMA, properties=NO_CLIENT_RETRY)
    a = first.load_table("db.t")
    b = second.load_table("db.t")
    a.append(pa.table({"writer": ["a"], "n": [1]}, schema=SCHEMA))
    with pytest.raises(CommitFailedException):
        b.append(pa.table({"writer": ["b"], "n": [1]}, schema=SCHEMA))
    b.refresh()
    b.append(pa.table({"writer": ["b"], "n": [1]}, schema=SCHEMA))
    final = handle.backing.load_table("db.t")
    assert len(final.metadata.snapshots) == 2
    assert sorted(final.scan().to_arrow().column("writer").to_pylist()) == ["a", "b"]


def test_racing_writers_retry_until_every_commit_lands(
    make_catalog: CatalogFactory, backing_values: dict[str, Any]
) -> None:
    handle = make_catalog(backing_values)
    setup = handle.rest_client()
    setup.create_namespace("db")
    setup.create_table("db.t", SCHEMA, properties=NO_CLIENT_RETRY)
    commits_each = 6
    conflicts: dict[str, int] = {"a": 0, "b": 0}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def writer(name: str) -> None:
        try:
            client = handle.rest_client()
            barrier.wait()
            for i in range(commits_each):
                while True:
                    table = client.load_table("db.t")
                    try:
                        table.append(pa.table({"writer": [name], "n": [i]}, schema=SCHEMA))
                        break
                    except CommitFailedException:
                        conflicts[name] += 1
        except BaseException as exc:  # surfaced by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)
    assert not errors, errors
    assert sum(conflicts.values()) > 0, "the writers never collided; the test proves nothing"
    final = handle.backing.load_table("db.t")
    assert len(final.metadata.snapshots) == 2 * commits_each
    rows = final.scan().to_arrow()
    assert rows.num_rows == 2 * commits_each
    for name in ("a", "b"):
        assert sorted(r["n"] for r in rows.to_pylist() if r["writer"] == name) == list(range(commits_each))
    # The snapshot chain is linear: every snapshot's parent is the one before it.
    snapshots = sorted(final.metadata.snapshots, key=lambda s: s.sequence_number)
    for parent, child in itertools.pairwise(snapshots):
        assert child.parent_snapshot_id == parent.snapshot_id
