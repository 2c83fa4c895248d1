"""One long poll over many streams (``StreamStore.wait_for_data``): a single watch that the first
stream to pass its offset wakes, naming every stream that did until the poller closes it."""

from __future__ import annotations

import pytest

from tabletopic.s3stream.memory import MemoryStreamStore
from tabletopic.s3stream.semantics import DataWaiters
from tabletopic.s3stream.streams import DataWatch


async def test_the_first_stream_past_its_offset_wakes_the_watch_and_each_is_named() -> None:
    store = MemoryStreamStore()
    streams = await store.create_streams(4)
    watch = store.wait_for_data((sid, 0) for sid in streams)
    assert not watch.ready.done() and watch.woken == set()
    await store.append(streams[2], b"a", 1)
    assert watch.ready.done() and watch.woken == {streams[2]}
    # Until the poller closes it, a later append is named too (the poller has not re-read yet).
    await store.append(streams[0], b"b", 1)
    assert watch.woken == {streams[0], streams[2]}
    watch.close()
    await store.append(streams[1], b"c", 1)
    assert watch.woken == {streams[0], streams[2]}


async def test_a_stream_already_past_its_offset_or_not_held_wakes_it_at_once() -> None:
    store = MemoryStreamStore()
    sid = await store.create_stream()
    await store.append(sid, b"a", 1)
    assert store.wait_for_data([(sid, 0)]).woken == {sid}
    assert store.wait_for_data([(sid, 1)]).woken == set()
    assert store.wait_for_data([(sid, 1), (999, 0)]).woken == {999}


async def test_no_stream_leaves_a_watch_that_never_wakes() -> None:
    watch = MemoryStreamStore().wait_for_data([])
    assert not watch.ready.done()
    watch.close()
    assert watch.ready.cancelled()


@pytest.mark.parametrize("gone", ["deleted", "store closed"])
async def test_a_stream_gone_from_here_wakes_its_watches(gone: str) -> None:
    store = MemoryStreamStore()
    kept, lost = await store.create_streams(2)
    watch = store.wait_for_data([(kept, 0), (lost, 0)])
    if gone == "deleted":
        await store.delete_stream(lost)
        assert watch.woken == {lost}
    else:
        await store.close()
        assert watch.woken == {kept, lost}
    assert watch.ready.done()


async def test_closed_watches_do_not_pile_up_on_an_idle_stream() -> None:
    waiters = DataWaiters()
    for _ in range(1000):
        watch = DataWatch()
        waiters.add(7, 0, 0, watch)
        watch.close()
    assert len(waiters._pending) == 1  # each add drops the closed ones before it
    waiters.advance(1)
    assert waiters._pending == []
