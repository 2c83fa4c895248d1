"""The object store failing underneath the engine: the object WAL fails appends cleanly and rewinds,
the local WAL keeps acknowledging and retries uploads, and a full WAL pushes back with a bounded
wait. The store in these tests is the real local one with a switch that makes it fail."""

from __future__ import annotations

import asyncio

import pytest

from tabletopic.s3stream.streams import StorageUnavailable
from tests.support.failing_objects import FailingPuts
from tests.support.store_harness import StoreHarness, payload_for
from tests.support.waiting import wait_until


@pytest.fixture
def switchable(local_harness: StoreHarness) -> FailingPuts:
    store = FailingPuts(local_harness.object_store())
    local_harness.object_store = lambda: store  # type: ignore[method-assign]
    return store


@pytest.fixture
def object_harness(local_harness: StoreHarness) -> StoreHarness:
    local_harness.wal_mode = "object"
    return local_harness


async def test_object_wal_fails_appends_when_the_store_fails_and_rewinds_offsets(
    object_harness: StoreHarness, switchable: FailingPuts
) -> None:
    store = await object_harness.open()
    sid = await store.create_stream()
    assert await store.append(sid, b"before", 2) == 0
    switchable.broken = True
    results = await asyncio.gather(*(store.append(sid, b"lost", 1) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, StorageUnavailable) for r in results)
    assert store.stream_info(sid).end_offset == 2
    assert [bytes(b.payload) for b in await store.fetch(sid, 0, 1000)] == [b"before"]
    switchable.broken = False
    assert await store.append(sid, b"after", 1) == 2  # no gap where the failed appends were
    store = await object_harness.reopen(store)
    assert [bytes(b.payload) for b in await store.fetch(sid, 0, 1000)] == [b"before", b"after"]


async def test_local_wal_keeps_acknowledging_and_uploads_once_the_store_is_back(
    local_harness: StoreHarness, switchable: FailingPuts
) -> None:
    store = await local_harness.open()
    sid = await store.create_stream()
    switchable.broken = True
    for i in range(10):
        assert await store.append(sid, payload_for(sid, i, 1000), 1) == i
    flushing = asyncio.ensure_future(store.flush())
    await wait_until(lambda: switchable.refused >= 2, message="the upload was tried again")
    assert not flushing.done()  # the upload is being retried
    switchable.broken = False
    await asyncio.wait_for(flushing, 10)
    assert len(await store.locate(sid, 0, 10)) >= 1


async def test_a_full_wal_pushes_back_then_fails_with_a_clear_error(
    local_harness: StoreHarness, switchable: FailingPuts
) -> None:
    # Blocks are sealed by size alone (not by the 200 ms timer), so the WAL fills the same way on
    # a slow machine: each seal starts a segment whose 4 KiB header counts against the capacity,
    # and a timer-sealed small block would spend one of those headers on fewer records.
    store = await local_harness.open(
        wal_capacity_bytes=64 * 1024,
        upload_bytes=16 * 1024,
        upload_interval_ms=60_000,
        append_timeout_ms=300,
    )
    sid = await store.create_stream()
    switchable.broken = True
    with pytest.raises(StorageUnavailable, match="WAL is full"):
        for i in range(200):
            await store.append(sid, payload_for(sid, i, 1000), 1)
    end = store.stream_info(sid).end_offset
    assert end >= 50
    switchable.broken = False
    # Uploads resume (after their backoff), segments are released, appends flow again.
    await wait_until(lambda: store.state.backlog_bytes() <= 64 * 1024, message="the WAL has room")
    assert await asyncio.wait_for(store.append(sid, b"again", 1), 10) == end


async def test_object_wal_backlog_is_bounded_by_the_wal_capacity(
    object_harness: StoreHarness, switchable: FailingPuts
) -> None:
    store = await object_harness.open(
        wal_capacity_bytes=32 * 1024, append_timeout_ms=300, object_batch_ms=2000
    )
    sid = await store.create_stream()
    switchable.broken = True
    pending = [asyncio.ensure_future(store.append(sid, payload_for(sid, i, 1000), 1)) for i in range(100)]
    results = await asyncio.gather(*pending, return_exceptions=True)
    assert any("WAL is full" in str(r) for r in results)
    assert all(isinstance(r, StorageUnavailable) for r in results)
    switchable.broken = False
    assert await store.append(sid, b"ok", 1) == 0


async def test_pipelined_batch_objects_fail_in_order_without_gaps_or_duplicates(
    object_harness: StoreHarness, switchable: FailingPuts
) -> None:
    store = await object_harness.open(object_batch_bytes=4096, object_batch_ms=2)
    sid = await store.create_stream()
    acked: dict[int, bytes] = {}

    async def producer(index: int) -> None:
        for round_number in range(30):
            payload = payload_for(sid, index * 1000 + round_number, 700)
            try:
                acked[await store.append(sid, payload, 1)] = payload
            except StorageUnavailable:  # back off until the breaker mends the store
                await wait_until(lambda: not switchable.broken, interval=0.001, message="store mended")

    async def breaker() -> None:
        # Break the store once appends flow, mend it once a PUT has failed.
        await wait_until(lambda: len(acked) >= 24, interval=0.001, message="appends flow")
        switchable.broken = True
        await wait_until(lambda: switchable.refused > 0, interval=0.001, message="a PUT failed")
        switchable.broken = False

    await asyncio.gather(breaker(), *(producer(i) for i in range(12)))
    assert 0 < len(acked) < 360
    for current in (store, await object_harness.reopen(store)):
        batches = await current.fetch(sid, 0, 1 << 30)
        assert [b.base_offset for b in batches] == list(range(len(batches)))
        assert {b.base_offset: bytes(b.payload) for b in batches} == acked
