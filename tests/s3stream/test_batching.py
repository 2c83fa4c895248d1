"""Group commit over PUTs in the object WAL: when a batch object starts (the pure pacer), and what
the store does with several uploads in flight: appends arriving during an upload form the next
batch object, acknowledgements follow offset order whatever order the PUTs finish in, and a failed
PUT fails its own batch and the ones after it (their offsets follow it: a partition has no gaps),
never an earlier one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tabletopic import database
from tabletopic.s3stream.batching import BatchPacer
from tabletopic.s3stream.reserved_keys import RESERVE_AHEAD
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.s3stream.streams import StorageUnavailable
from tests.support.store_harness import StoreHarness, local_object_settings
from tests.support.waiting import wait_until

# --- the pacer -----------------------------------------------------------------------------------


def test_the_first_batch_starts_at_once() -> None:
    assert BatchPacer(max_in_flight=2, min_interval=0.25).wait(now=100.0) == 0.0


def test_the_next_batch_waits_at_most_batch_ms_after_the_last_start() -> None:
    pacer = BatchPacer(max_in_flight=4, min_interval=0.25)
    pacer.started(now=100.0)
    assert pacer.wait(now=100.1) == pytest.approx(0.15)
    assert pacer.wait(now=100.25) == 0.0
    assert pacer.wait(now=105.0) == 0.0  # idle since: the next append starts its batch at once


def test_no_batch_starts_while_every_upload_slot_is_busy() -> None:
    pacer = BatchPacer(max_in_flight=2, min_interval=0.0)
    pacer.started(now=1.0)
    assert pacer.wait(now=1.0) == 0.0
    pacer.started(now=1.0)
    assert not pacer.has_slot()
    assert pacer.wait(now=50.0) is None  # however long it waited: the bound holds
    pacer.finished()
    assert pacer.wait(now=50.0) == 0.0


def test_a_pacer_refuses_an_end_without_a_start_and_bad_bounds() -> None:
    with pytest.raises(RuntimeError):
        BatchPacer(max_in_flight=1, min_interval=0.0).finished()
    with pytest.raises(ValueError):
        BatchPacer(max_in_flight=0, min_interval=0.0)
    with pytest.raises(ValueError):
        BatchPacer(max_in_flight=1, min_interval=-1.0)


# --- the store with uploads held in their PUT ---------------------------------------------------


class HeldPuts:
    """Replaces a store's PUTs: each waits until the test releases it (or fails it)."""

    def __init__(self, store: S3StreamStore) -> None:
        self._release: list[asyncio.Future[bool]] = []
        self._put = store.state.objects.put
        store.state.objects.put = self._held  # type: ignore[method-assign]

    async def _held(self, key: str, data: object) -> None:
        release: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._release.append(release)
        ok = await release
        if not ok:
            raise OSError("PUT refused by the test")
        await self._put(key, data)  # type: ignore[arg-type]

    @property
    def started(self) -> int:
        return len(self._release)

    async def wait_started(self, count: int) -> None:
        await wait_until(lambda: self.started == count, interval=0.001, message=f"{count} PUTs started")

    def release(self, index: int, ok: bool = True) -> None:
        self._release[index].set_result(ok)


@pytest.fixture
async def objects_harness(tmp_path: Path) -> AsyncIterator[StoreHarness]:
    h = StoreHarness(tmp_path, "object", local_object_settings(tmp_path), database.default_url(tmp_path))
    yield h
    await h.close_all()


async def _stream_with_held_puts(
    harness: StoreHarness, max_in_flight: int
) -> tuple[S3StreamStore, int, HeldPuts]:
    """A store that starts a batch object at once (no batching window) with `max_in_flight` upload
    slots, one stream, and its PUTs held until the test releases them."""
    store = await harness.open(object_batch_ms=0, object_max_in_flight=max_in_flight)
    sid = await store.create_stream()
    return store, sid, HeldPuts(store)


async def test_a_lone_append_is_acknowledged_after_one_upload_not_after_a_window(
    objects_harness: StoreHarness,
) -> None:
    store = await objects_harness.open(object_batch_ms=60_000)
    sid = await store.create_stream()
    assert await asyncio.wait_for(store.append(sid, b"alone", 1), 10) == 0


async def test_appends_arriving_during_an_upload_form_the_next_batch_object(
    objects_harness: StoreHarness,
) -> None:
    store, sid, held = await _stream_with_held_puts(objects_harness, max_in_flight=1)
    first = asyncio.ensure_future(store.append(sid, b"first", 1))
    await held.wait_started(1)
    later = [asyncio.ensure_future(store.append(sid, b"later", 1)) for _ in range(5)]
    await asyncio.sleep(0.05)  # the subject: nothing starts while the slot is busy, however long
    assert held.started == 1  # the only slot is busy: the later appends wait, together
    held.release(0)
    assert await first == 0
    await held.wait_started(2)
    held.release(1)
    assert sorted(await asyncio.gather(*later)) == [1, 2, 3, 4, 5]
    assert held.started == 2  # five appends, one batch object


async def test_uploads_in_flight_never_exceed_the_bound(objects_harness: StoreHarness) -> None:
    store, sid, held = await _stream_with_held_puts(objects_harness, max_in_flight=2)
    appends = []
    for i in range(6):
        appends.append(asyncio.ensure_future(store.append(sid, b"x%d" % i, 1)))
        await asyncio.sleep(0.02)  # the subject: appends spread in time still find both slots busy
    assert held.started == 2
    held.release(0)
    await held.wait_started(3)
    held.release(1)
    held.release(2)
    await asyncio.sleep(0.02)  # time for a third upload to start if the bound let it (it must not)
    for index in range(3, held.started):
        held.release(index)
    assert sorted(await asyncio.gather(*appends)) == list(range(6))
    assert held.started <= 4


async def test_acknowledgements_follow_offset_order_when_puts_finish_out_of_order(
    objects_harness: StoreHarness,
) -> None:
    store, sid, held = await _stream_with_held_puts(objects_harness, max_in_flight=3)
    first = asyncio.ensure_future(store.append(sid, b"first", 1))
    await held.wait_started(1)
    second = asyncio.ensure_future(store.append(sid, b"second", 1))
    await held.wait_started(2)
    held.release(1)  # the later object is stored first
    await asyncio.sleep(0.05)  # time to finish, were it free to: this checks that it does not
    assert not second.done()  # its offsets follow the first's, which is not committed yet
    assert store.stream_info(sid).end_offset == 0
    held.release(0)
    assert await first == 0
    assert await second == 1
    assert [bytes(b.payload) for b in await store.fetch(sid, 0, 1000)] == [b"first", b"second"]


async def test_a_failed_put_fails_its_batch_and_the_later_ones_but_not_the_earlier(
    objects_harness: StoreHarness,
) -> None:
    store, sid, held = await _stream_with_held_puts(objects_harness, max_in_flight=3)
    appends = []
    for count in (1, 2, 3):
        appends.append(asyncio.ensure_future(store.append(sid, b"batch", 1)))
        await held.wait_started(count)
    held.release(2)  # the last succeeds, the middle fails, the first succeeds last
    held.release(1, ok=False)
    held.release(0)
    results = await asyncio.gather(*appends, return_exceptions=True)
    assert results[0] == 0
    assert isinstance(results[1], StorageUnavailable)
    assert isinstance(results[2], StorageUnavailable)  # would follow a gap
    assert store.stream_info(sid).end_offset == 1
    again = asyncio.ensure_future(store.append(sid, b"again", 1))
    await held.wait_started(4)
    held.release(3)
    assert await again == 1  # no gap where the failed batches were


# --- object keys reserved ahead -----------------------------------------------------------------


def _objects_by_state(store: S3StreamStore) -> dict[str, list[int]]:
    with store.state.meta.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT object_id, state FROM s3stream_objects ORDER BY object_id")).all()
    by_state: dict[str, list[int]] = {}
    for object_id, state in rows:
        by_state.setdefault(str(state), []).append(int(object_id))
    return by_state


async def test_batch_objects_use_keys_reserved_ahead_in_one_transaction(
    objects_harness: StoreHarness,
) -> None:
    store = await objects_harness.open(delete_grace_ms=120_000)
    sid = await store.create_stream()
    for i in range(3):
        assert await store.append(sid, b"a%d" % i, 1) == i
    objects = _objects_by_state(store)
    assert len(objects["committed"]) == 3
    assert len(objects["prepared"]) == RESERVE_AHEAD - 3  # one reservation served all three
    assert set(objects["prepared"]) <= store.state.inflight_objects  # so GC leaves them alone


async def test_keys_reserved_ahead_are_dropped_before_garbage_collection_could_take_them(
    objects_harness: StoreHarness,
) -> None:
    store = await objects_harness.open(delete_grace_ms=2_000)  # kept at most 1 s
    sid = await store.create_stream()
    assert await store.append(sid, b"first", 1) == 0
    first_reservation = _objects_by_state(store)["prepared"]
    await asyncio.sleep(1.2)  # the subject: the reservation ages past half the GC grace
    assert await store.append(sid, b"second", 1) == 1
    committed = _objects_by_state(store)["committed"]
    assert committed[-1] > max(first_reservation)  # from a fresh reservation
    assert not set(first_reservation) & store.state.inflight_objects  # left to GC as orphans
