"""Shared WAL takeover on the storage side: a broker's store writes a shared WAL (cluster mode,
streams opened with epochs), another takes it over while the writer is still running (as a paused
broker would be), and every acknowledged append ends up committed once, under the dead broker's
streams, while the deposed writer acknowledges nothing more."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tabletopic import database
from tabletopic.s3stream import shared_wal
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.db import StreamMetadata
from tabletopic.s3stream.shared_wal import WalUnreachable, recover_wal
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.s3stream.streams import StreamFenced
from tabletopic.s3stream.wal_fence import Role, TakeoverLost, WalFence, WalFenced, WalToken
from tests.support.store_harness import StoreHarness, local_object_settings, payload_for


class Brokers:
    """Stores of several brokers over one metadata database, object store and shared WAL path."""

    def __init__(self, harness: StoreHarness) -> None:
        self.harness = harness
        self.path = harness.root / "shared"

    def settings(self, node_id: int) -> StoreSettings:
        return self.harness.settings().with_changes(
            wal_mode="shared", wal_path=self.path, wal_dir=self.path / str(node_id), node_id=node_id
        )

    async def open(self, node_id: int) -> S3StreamStore:
        engine = database.create_engine(self.harness.url)
        self.harness.engines.append(engine)
        store = S3StreamStore(self.settings(node_id), engine, self.harness.object_store(), owned_only=True)
        await store.start()
        self.harness.stores.append(store)
        return store

    def recover(
        self,
        writer: S3StreamStore,
        node_id: int,
        recoverer: int,
        after_fence: Callable[[], None] | None = None,
    ) -> Any:
        assert writer.wal_incarnation is not None
        directory = self.path / str(node_id) / writer.wal_incarnation
        token = WalToken.here(Role.FENCED, recoverer, f"r{recoverer}")
        engine = database.create_engine(self.harness.url)
        self.harness.engines.append(engine)
        return recover_wal(
            directory,
            node_id,
            token,
            StreamMetadata(engine),
            self.harness.object_store(),
            self.settings(recoverer),
            after_fence,
        )


@pytest.fixture
async def brokers(tmp_path: Path) -> AsyncIterator[Brokers]:
    # A long upload interval: what is appended stays in the WAL only, as at a crash.
    h = StoreHarness(tmp_path, "shared", local_object_settings(tmp_path), database.default_url(tmp_path))
    h.overrides["upload_interval_ms"] = 600_000
    yield Brokers(h)
    await h.close_all()


async def _write(store: S3StreamStore, sid: int, count: int) -> list[bytes]:
    payloads = [payload_for(sid, i, 200) for i in range(count)]
    for payload in payloads:
        await store.append(sid, payload, 1)
    return payloads


async def _payloads(store: S3StreamStore, sid: int) -> list[bytes]:
    return [bytes(b.payload) for b in await store.fetch(sid, 0, 1 << 22)]


async def _stream_written_by_broker_1(brokers: Brokers, count: int) -> tuple[S3StreamStore, int, list[bytes]]:
    """Broker 1's store with one stream it leads at epoch 1 and `count` appends in its WAL: where
    every takeover test starts."""
    a = await brokers.open(1)
    sid = await a.create_stream()
    await a.open_stream(sid, 1, owner=1)
    return a, sid, await _write(a, sid, count)


async def _assert_led_by(brokers: Brokers, node_id: int, sid: int, written: list[bytes]) -> None:
    """The new leader `node_id` opens the stream (epoch 2) at the end of what was written and reads
    back every acknowledged append once."""
    b = await brokers.open(node_id)
    assert (await b.open_stream(sid, 2, owner=node_id)).end_offset == len(written)
    assert await _payloads(b, sid) == written


async def test_takeover_commits_every_acknowledged_append_and_the_new_leader_opens_at_its_end(
    brokers: Brokers,
) -> None:
    a = await brokers.open(1)
    sids = [await a.create_stream() for _ in range(3)]
    for sid in sids:
        await a.open_stream(sid, 1, owner=1)
    written = {sid: await _write(a, sid, 5) for sid in sids}
    result = await asyncio.to_thread(brokers.recover, a, 1, 2)
    assert (result.records, result.streams) == (15, 3)
    b = await brokers.open(2)
    for sid in sids:
        info = await b.open_stream(sid, 2, owner=2)
        assert info.end_offset == 5
        assert await _payloads(b, sid) == written[sid]


async def test_deposed_writer_acknowledges_nothing_after_the_fence(brokers: Brokers) -> None:
    a, sid, written = await _stream_written_by_broker_1(brokers, 3)
    await asyncio.to_thread(brokers.recover, a, 1, 2)
    with pytest.raises(WalFenced):
        await a.append(sid, b"late" * 50, 1)
    with pytest.raises(StreamFenced):  # and every later append, with the error clients move on
        await a.append(sid, b"later" * 50, 1)
    await _assert_led_by(brokers, 2, sid, written)


async def test_deposed_writers_late_upload_is_refused_after_the_takeover(brokers: Brokers) -> None:
    a, sid, written = await _stream_written_by_broker_1(brokers, 3)
    await asyncio.to_thread(brokers.recover, a, 1, 2)
    with pytest.raises(StreamFenced):  # the deposed store uploads nothing: the recoverer committed it
        await a.flush([sid])
    b = await brokers.open(2)
    await b.open_stream(sid, 2, owner=2)
    assert await _payloads(b, sid) == written


async def test_a_deposed_writer_opens_no_stream_before_it_has_written_anything(brokers: Brokers) -> None:
    """Woken from a pause after its WAL was taken over, a broker learns it before it takes a stream
    on, not at its first write: leading it, it would append (and upload) what it can never
    acknowledge."""
    a, _, _ = await _stream_written_by_broker_1(brokers, 2)
    other = await a.create_stream()
    await asyncio.to_thread(brokers.recover, a, 1, 2)
    opened = await a.open_streams([(other, 1, 1)])
    assert isinstance(opened[other], WalFenced)
    assert not a.is_open(other)


async def test_a_deposed_writer_commits_none_of_the_appends_its_fence_check_refused(
    brokers: Brokers,
) -> None:
    """A stream the deposed broker opened after the recoverer read the WAL is still its own in the
    database (the takeover knows only the streams the WAL names). Appends refused by the fence
    check must leave nothing an upload could commit: once they did, and every retry of a refused
    batch became one more copy of it in the stream."""
    a, _, _ = await _stream_written_by_broker_1(brokers, 2)
    other = await a.create_stream()
    await a.open_stream(other, 1, owner=1)  # nothing appended yet: not in the WAL the takeover reads
    await asyncio.to_thread(brokers.recover, a, 1, 2)
    with pytest.raises(WalFenced):
        await a.append(other, b"never acknowledged" * 20, 1)
    with pytest.raises(StreamFenced):
        await a.flush([other])
    engine = database.create_engine(brokers.harness.url)
    brokers.harness.engines.append(engine)
    assert StreamMetadata(engine).stream_ends([other])[other] == (0, 1)  # nothing committed


async def test_a_second_takeover_commits_nothing_again(brokers: Brokers) -> None:
    a, sid, written = await _stream_written_by_broker_1(brokers, 4)
    first = await asyncio.to_thread(brokers.recover, a, 1, 2)
    second = await asyncio.to_thread(brokers.recover, a, 1, 3)
    assert (first.records, second.records) == (4, 0)
    await _assert_led_by(brokers, 2, sid, written)


async def test_racing_recoverers_the_last_to_fence_wins_and_data_lands_once(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, sid, written = await _stream_written_by_broker_1(brokers, 4)
    assert a.wal_incarnation is not None
    directory = brokers.path / "1" / a.wal_incarnation
    read = shared_wal.read_wal

    def read_then_overtaken(path: Path) -> Any:
        records = read(path)
        WalFence(path).fence(WalToken.here(Role.FENCED, 3, "r3"))  # recoverer 3 fences meanwhile
        return records

    monkeypatch.setattr(shared_wal, "read_wal", read_then_overtaken)
    with pytest.raises(TakeoverLost):
        await asyncio.to_thread(brokers.recover, a, 1, 2)
    monkeypatch.setattr(shared_wal, "read_wal", read)
    assert WalFence(directory).read() is not None
    winner = await asyncio.to_thread(brokers.recover, a, 1, 3)
    assert winner.records == 4
    await _assert_led_by(brokers, 3, sid, written)


async def test_a_recoverer_paused_after_its_fence_loses_to_one_that_finished_and_removed_the_wal(
    brokers: Brokers,
) -> None:
    a, sid, written = await _stream_written_by_broker_1(brokers, 4)
    assert a.wal_incarnation is not None
    directory = brokers.path / "1" / a.wal_incarnation
    finished: list[int] = []

    def second_recoverer_runs_while_the_first_is_paused() -> None:
        finished.append(brokers.recover(a, 1, 3).records)
        shared_wal.remove_wal(directory)

    with pytest.raises(TakeoverLost, match="recovered and removed by another broker"):
        await asyncio.to_thread(brokers.recover, a, 1, 2, second_recoverer_runs_while_the_first_is_paused)
    assert finished == [4]
    await _assert_led_by(brokers, 3, sid, written)


async def test_a_recoverer_reading_while_the_winner_removes_the_wal_file_by_file_loses(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The winner removes a recovered WAL's files before its directory: a reader that listed the
    segments finds one gone while the directory is still there. It lost the takeover; the broker
    must not end (a start taking back its earlier WAL did, with FileNotFoundError)."""
    a, sid, written = await _stream_written_by_broker_1(brokers, 4)
    assert a.wal_incarnation is not None
    directory = brokers.path / "1" / a.wal_incarnation
    finished: list[int] = []
    read_segment = shared_wal.read_segment

    def winner_removes_files_meanwhile(path: Path, index: int) -> Any:
        if not finished:
            finished.append(0)  # the winner's own reads go straight through
            finished[0] = brokers.recover(a, 1, 3).records
            for file in directory.iterdir():
                file.unlink()
        return read_segment(path, index)

    monkeypatch.setattr(shared_wal, "read_segment", winner_removes_files_meanwhile)
    with pytest.raises(TakeoverLost, match="which is removing it"):
        await asyncio.to_thread(brokers.recover, a, 1, 2)
    assert finished == [4]
    await _assert_led_by(brokers, 3, sid, written)


async def test_recoverer_dying_before_its_commit_leaves_the_takeover_to_the_next(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, sid, written = await _stream_written_by_broker_1(brokers, 4)

    def dies(*_: Any) -> set[int]:
        raise SystemExit("recoverer killed after its PUT")

    monkeypatch.setattr(StreamMetadata, "commit_recovery", dies)
    with pytest.raises(SystemExit):
        await asyncio.to_thread(brokers.recover, a, 1, 2)
    monkeypatch.undo()
    assert (await asyncio.to_thread(brokers.recover, a, 1, 3)).records == 4
    await _assert_led_by(brokers, 3, sid, written)


async def test_restarted_broker_takes_back_its_earlier_wal_at_start(brokers: Brokers) -> None:
    a, sid, written = await _stream_written_by_broker_1(brokers, 3)
    old = a.wal_incarnation
    # The same broker starts again while the first incarnation is abandoned (as after kill -9).
    again = await brokers.open(1)
    assert again.recovered_wals == [str(brokers.path / "1" / str(old))]
    assert not (brokers.path / "1" / str(old)).exists()
    with pytest.raises(WalFenced):
        await a.append(sid, b"x" * 10, 1)
    await again.open_stream(sid, 2, owner=1)
    assert await _payloads(again, sid) == written
    assert await again.append(sid, b"y" * 10, 1) == 3


async def test_a_wal_directory_not_mounted_here_is_never_taken_over_as_empty(
    brokers: Brokers, tmp_path: Path
) -> None:
    a = await brokers.open(1)
    sid = await a.create_stream()
    await a.open_stream(sid, 1, owner=1)
    await _write(a, sid, 2)
    engine = database.create_engine(brokers.harness.url)
    brokers.harness.engines.append(engine)
    elsewhere = tmp_path / "not-mounted" / "1" / str(a.wal_incarnation)
    token = WalToken.here(Role.FENCED, 2, "r2")
    for directory in (elsewhere, Path("1") / str(a.wal_incarnation)):
        with pytest.raises(WalUnreachable, match=r"s3stream\.wal\.path"):
            recover_wal(
                directory,
                1,
                token,
                StreamMetadata(engine),
                brokers.harness.object_store(),
                brokers.settings(2),
            )
    assert not elsewhere.parent.exists()
    await a.append(sid, b"still the writer" * 4, 1)  # nothing was fenced


async def test_a_handed_over_stream_is_closed_with_every_acknowledged_append_and_no_owner(
    brokers: Brokers,
) -> None:
    a, sid, written = await _stream_written_by_broker_1(brokers, 3)
    late = asyncio.ensure_future(a.append(sid, b"in flight" * 10, 1))
    await asyncio.sleep(0)  # one loop turn: the append is under way when the close begins
    closing = asyncio.ensure_future(a.close_stream(sid))
    await asyncio.sleep(0)  # one loop turn: the close has begun
    with pytest.raises(StreamFenced):  # being handed over: refused, the client finds the new leader
        await a.append(sid, b"after" * 10, 1)
    await closing
    acknowledged = not isinstance((await asyncio.gather(late, return_exceptions=True))[0], BaseException)
    assert (await asyncio.to_thread(a.state.meta.stream_ends, [sid]))[sid][1] is None  # owner cleared
    b = await brokers.open(2)
    info = await b.open_stream(sid, 2, owner=2)
    payloads = await _payloads(b, sid)
    assert payloads[:3] == written
    if acknowledged:
        assert info.end_offset == 4


async def test_a_hand_over_cancelled_while_uploading_leaves_its_appends_to_the_closing_upload(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker stopping while it hands partitions over cancels the hand-over mid-upload; what the
    streams acknowledged must still be committed when the store closes (it was once left out of
    every upload and trimmed from the WAL, and the next leader reused its offsets)."""
    a, sid, written = await _stream_written_by_broker_1(brokers, 3)
    objects = a.state.objects
    put, putting, go_on = objects.put, asyncio.Event(), asyncio.Event()

    async def slow_put(key: str, parts: Any) -> None:
        putting.set()
        await go_on.wait()
        await put(key, parts)

    monkeypatch.setattr(objects, "put", slow_put)
    hand_over = asyncio.create_task(a.close_streams([sid]))
    await asyncio.wait_for(putting.wait(), 10)
    hand_over.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hand_over
    assert a.is_open(sid)  # still held: closing the store uploads it
    go_on.set()
    await a.close()
    await _assert_led_by(brokers, 2, sid, written)


async def test_a_store_tells_which_streams_hold_acknowledged_appends_not_uploaded_yet(
    brokers: Brokers,
) -> None:
    """What a leader asked by another broker's table coordinator checks before it uploads: only
    streams with acknowledged appends still only in the WAL need an upload."""
    a = await brokers.open(1)
    pending, quiet = await a.create_stream(), await a.create_stream()
    for sid in (pending, quiet):
        await a.open_stream(sid, 1, owner=1)
    await _write(a, pending, 2)
    assert a.not_uploaded([pending, quiet, 999]) == [pending]
    await a.flush([pending])
    assert a.not_uploaded([pending, quiet]) == []


async def test_disowning_a_node_clears_its_open_streams_and_no_one_elses(brokers: Brokers) -> None:
    """What a restarted broker does before it leads anything (``broker/wal_takeover.py``): streams
    its earlier starts held are disowned; streams another broker holds keep their owner."""
    a, mine, _ = await _stream_written_by_broker_1(brokers, 2)
    b = await brokers.open(2)
    theirs = await b.create_stream()
    await b.open_stream(theirs, 1, owner=2)
    meta = a.state.meta
    assert await asyncio.to_thread(meta.disown, 1) == 1
    ends = await asyncio.to_thread(meta.stream_ends, [mine, theirs])
    assert (ends[mine][1], ends[theirs][1]) == (None, 2)


async def test_disowning_later_keeps_the_streams_the_new_start_holds(brokers: Brokers) -> None:
    """A start that began while another broker still took over an earlier start's WAL disowns
    later, when it may already lead partitions of its own: those streams keep it as owner."""
    a, earlier, _ = await _stream_written_by_broker_1(brokers, 2)
    now = await a.create_stream()
    await a.open_stream(now, 2, owner=1)
    meta = a.state.meta
    assert await asyncio.to_thread(meta.disown, 1, {now}) == 1
    ends = await asyncio.to_thread(meta.stream_ends, [earlier, now])
    assert (ends[earlier][1], ends[now][1]) == (None, 1)
