"""Stream ownership with epochs (cluster mode): two stores on one metadata database and object
store, as two brokers sharing them; opening a stream with a newer epoch fences the old owner, whose
commits, trims and closes are then refused, so it can never acknowledge a write again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tabletopic import database
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.s3stream.streams import StreamFenced, StreamNotFound
from tests.support.store_harness import StoreHarness, local_object_settings, payload_for
from tests.support.waiting import wait_until


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreHarness]:
    postgres = request.param == "postgres"
    url = request.getfixturevalue("postgres_url") if postgres else database.default_url(tmp_path)
    h = StoreHarness(tmp_path, "object", local_object_settings(tmp_path), url)
    yield h
    await h.close_all()


async def _owned_by_a_then_b_opens_it(shared: StoreHarness) -> tuple[S3StreamStore, S3StreamStore, int]:
    """Two brokers' stores over the same metadata and a stream the first leads at epoch 1: the
    second is the owner-to-be that a test lets take the stream over."""
    a = await shared.open(owned_only=True)
    b = await shared.open(owned_only=True)
    sid = await a.create_stream()
    await a.open_stream(sid, 1, owner=1)
    return a, b, sid


def _hold_puts(store: S3StreamStore) -> tuple[asyncio.Event, list[object]]:
    """Holds every PUT of `store` until the returned gate is set; the list records the PUTs that
    started, so a test can take a stream over while its batch object is in flight."""
    gate = asyncio.Event()
    put = store.state.objects.put
    held: list[object] = []

    async def held_put(*args: object, **kwargs: object) -> object:
        held.append(args)
        await gate.wait()
        return await put(*args, **kwargs)  # type: ignore[arg-type]

    store.state.objects.put = held_put  # type: ignore[method-assign]
    return gate, held


async def test_newer_epoch_takes_over_with_every_acknowledged_batch(shared: StoreHarness) -> None:
    a = await shared.open(owned_only=True)
    b = await shared.open(owned_only=True)
    sid = await a.create_stream()
    assert not a.is_open(sid)  # created streams wait to be opened with an epoch
    await a.open_stream(sid, 1, owner=1)
    for i in range(3):
        await a.append(sid, payload_for(sid, i, 300), 2)
    info = await b.open_stream(sid, 2, owner=2)
    assert (info.start_offset, info.end_offset) == (0, 6)
    assert await b.append(sid, payload_for(sid, 3, 300), 2) == 6
    batches = await b.fetch(sid, 0, 1 << 20)
    assert [bt.base_offset for bt in batches] == [0, 2, 4, 6]


async def test_deposed_owner_cannot_acknowledge_an_append(shared: StoreHarness) -> None:
    a, b, sid = await _owned_by_a_then_b_opens_it(shared)
    await a.append(sid, b"x" * 100, 1)
    await b.open_stream(sid, 2, owner=2)
    with pytest.raises(StreamFenced):
        await a.append(sid, b"y" * 100, 1)
    assert not a.is_open(sid)  # the deposed store dropped the stream
    await b.append(sid, b"z" * 100, 1)
    assert [bt.payload for bt in await b.fetch(sid, 0, 1 << 20)] == [b"x" * 100, b"z" * 100]


async def test_stale_epoch_open_is_rejected(shared: StoreHarness) -> None:
    a = await shared.open(owned_only=True)
    b = await shared.open(owned_only=True)
    sid = await a.create_stream()
    await b.open_stream(sid, 5, owner=2)
    with pytest.raises(StreamFenced):
        await a.open_stream(sid, 4, owner=1)
    with pytest.raises(StreamFenced):
        await a.open_stream(sid, 5, owner=1)  # same epoch, another owner


async def test_deposed_owner_cannot_trim_or_close(shared: StoreHarness) -> None:
    a, b, sid = await _owned_by_a_then_b_opens_it(shared)
    await a.append(sid, b"x" * 100, 1)
    await a.append(sid, b"x" * 100, 1)
    await b.open_stream(sid, 2, owner=2)
    with pytest.raises(StreamFenced):
        await a.trim(sid, 1)
    assert b.stream_info(sid).start_offset == 0
    with pytest.raises(StreamFenced):
        await a.close_stream(sid)


async def test_close_uploads_pending_data_for_the_next_owner(shared: StoreHarness) -> None:
    a = await shared.open(owned_only=True, object_batch_ms=60_000)
    b = await shared.open(owned_only=True)
    sid = await a.create_stream()
    await a.open_stream(sid, 1, owner=1)
    pending = asyncio.create_task(a.append(sid, b"x" * 100, 1))
    await asyncio.sleep(0)  # one loop turn, not a wait: the append must be pending when closing
    await a.close_stream(sid)  # closing waits for the upload of what is pending
    assert await pending == 0
    assert not a.is_open(sid)
    info = await b.open_stream(sid, 2, owner=2)
    assert info.end_offset == 1


async def test_fencing_one_stream_does_not_fail_the_others_in_the_same_batch_object(
    shared: StoreHarness,
) -> None:
    a = await shared.open(owned_only=True)
    b = await shared.open(owned_only=True)
    moved, kept = await a.create_stream(), await a.create_stream()
    await a.open_stream(moved, 1, owner=1)
    await a.open_stream(kept, 1, owner=1)
    gate, held = _hold_puts(a)
    lost = asyncio.create_task(a.append(moved, b"m" * 100, 1))
    safe = asyncio.create_task(a.append(kept, b"k" * 100, 1))
    await wait_until(lambda: len(held) >= 1, message="both appends in one batch object's PUT")
    await b.open_stream(moved, 2, owner=2)  # taken over while both wait in one batch object's PUT
    gate.set()
    with pytest.raises(StreamFenced):
        await lost
    assert await safe == 0
    assert (await b.open_stream(moved, 2, owner=2)).end_offset == 0
    c = await shared.open(owned_only=True)
    assert (await c.open_stream(kept, 3, owner=3)).end_offset == 1


async def test_a_deposed_owner_commits_nothing_from_its_later_uploads_either(shared: StoreHarness) -> None:
    """Two batch objects in flight when the stream is taken over: the first commit finds the
    stream fenced and drops it here; the second, prepared before, must not commit its data
    for the stream unchecked (it moved the new owner's end offset over unacknowledged batches)."""
    a = await shared.open(owned_only=True, object_batch_bytes=100, object_max_in_flight=2)
    b = await shared.open(owned_only=True)
    sid = await a.create_stream()
    await a.open_stream(sid, 1, owner=1)
    gate, held = _hold_puts(a)
    first = asyncio.create_task(a.append(sid, payload_for(sid, 0, 300), 1))
    await wait_until(lambda: len(held) == 1, message="sealed, its upload waiting in PUT")
    second = asyncio.create_task(a.append(sid, payload_for(sid, 1, 300), 1))
    await wait_until(lambda: len(held) == 2, message="the second sealed behind it, waiting too")
    await b.open_stream(sid, 2, owner=2)
    gate.set()
    for append in (first, second):
        with pytest.raises(StreamFenced):
            await append
    assert await b.recorded_ends([sid]) == {sid: 0}
    assert await b.append(sid, b"z" * 100, 1) == 0
    c = await shared.open(owned_only=True)
    assert (await c.open_stream(sid, 3, owner=3)).end_offset == 1


async def test_every_owner_sees_the_epoch_history_of_the_owners_before_it(shared: StoreHarness) -> None:
    # What a new leader answers OffsetForLeaderEpoch from: each epoch begins where the stream's
    # committed end stood when its owner fenced the one before.
    a, b, sid = await _owned_by_a_then_b_opens_it(shared)
    await a.append(sid, payload_for(sid, 0, 100), 3)
    await b.open_stream(sid, 2, owner=2)
    await b.append(sid, payload_for(sid, 1, 100), 2)
    await a.open_stream(sid, 4, owner=1)
    history = a.epochs(sid)
    assert history.entries == ((1, 0), (2, 3), (4, 5))
    assert [history.epoch_at(offset) for offset in (0, 2, 3, 4, 5)] == [1, 1, 2, 2, 4]
    assert history.end_offset_for(1, log_end=5) == (1, 3)
    assert history.end_offset_for(3, log_end=5) == (2, 5)  # epoch 3 never wrote: 2 ended at 5
    assert history.end_offset_for(4, log_end=5) == (4, 5)


async def test_many_streams_open_in_one_call_and_each_fails_on_its_own(shared: StoreHarness) -> None:
    a = await shared.open(owned_only=True)
    b = await shared.open(owned_only=True)
    sids = [await a.create_stream() for _ in range(5)]
    await b.open_stream(sids[0], 9, owner=2)
    results = await a.open_streams([(sid, 3, 1) for sid in sids] + [(10_000, 3, 1)])
    assert isinstance(results[sids[0]], StreamFenced)
    assert isinstance(results[10_000], StreamNotFound)
    assert all(a.is_open(sid) for sid in sids[1:])
    assert not a.is_open(sids[0])
    assert [a.epochs(sid).entries for sid in sids[1:]] == [((3, 0),)] * 4


async def test_many_streams_close_in_one_call_and_a_taken_one_is_reported_alone(shared: StoreHarness) -> None:
    a = await shared.open(owned_only=True)
    b = await shared.open(owned_only=True)
    sids = [await a.create_stream() for _ in range(4)]
    await a.open_streams([(sid, 1, 1) for sid in sids])
    for sid in sids:
        await a.append(sid, payload_for(sid, 0, 100), 1)
    await b.open_stream(sids[0], 2, owner=2)  # taken over meanwhile
    failed = await a.close_streams(sids)
    assert list(failed) == [sids[0]] and isinstance(failed[sids[0]], StreamFenced)
    assert not any(a.is_open(sid) for sid in sids)
    for sid in sids[1:]:  # what the others held was uploaded for their next owner
        info = await b.open_stream(sid, 3, owner=2)
        assert info.end_offset == 1
