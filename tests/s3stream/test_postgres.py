"""The same engine with its metadata in PostgreSQL instead of SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.store_harness import StoreHarness, local_object_settings, payload_for

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["local", "object"])
async def pg_harness(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str
) -> AsyncIterator[StoreHarness]:
    h = StoreHarness(tmp_path, request.param, local_object_settings(tmp_path), postgres_url)
    yield h
    await h.close_all()


async def test_appends_survive_restart_and_compaction_on_postgres(pg_harness: StoreHarness) -> None:
    store = await pg_harness.open()
    streams = [await store.create_stream() for _ in range(3)]
    for i in range(5):
        await asyncio.gather(*(store.append(sid, payload_for(sid, i, 700), 2) for sid in streams))
        await store.flush()
    report = await store.compactor.run_once()
    assert report.merged_stream_set == 5
    store = await pg_harness.reopen(store, log_cache_bytes=1 << 20)
    store.state.log_cache.capacity = 0
    store.state.log_cache.evict()
    for sid in streams:
        batches = await store.fetch(sid, 0, 1 << 20)
        assert [b.base_offset for b in batches] == [0, 2, 4, 6, 8]
        assert [bytes(b.payload) for b in batches] == [payload_for(sid, i, 700) for i in range(5)]


async def test_stream_ids_are_unique_across_stores_sharing_one_database(pg_harness: StoreHarness) -> None:
    first = await pg_harness.open()
    ids = await asyncio.gather(*(first.create_stream() for _ in range(20)))
    assert len(set(ids)) == 20
    await first.delete_stream(ids[0])
    second = await pg_harness.reopen(first)
    assert set(second.stream_ids()) == set(ids[1:])
