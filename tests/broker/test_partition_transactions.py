"""Where an aborted transaction's entry in the aborted index starts. Readers skip the producer's
batches from that offset up to the ABORT marker, whatever markers lie between, so an entry starting
at or before the producer's previous marker would hide a committed transaction's records: a clean
run's copying pipeline lost four copies that way, committed but invisible read_committed."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tabletopic.broker.transactions.partitions import PartitionTransactions
from tabletopic.records.encoder import Record, build_batch, build_control_batch
from tabletopic.records.transactions import ControlType
from tests.support.waiting import wait_until

STREAM, PRODUCER = 7, 1000


def data(sequence: int, producer_id: int = PRODUCER) -> bytes:
    """Two records of a producer's transaction."""
    records = [Record(None, b"a"), Record(None, b"b")]
    return build_batch(
        records, transactional=True, producer_id=producer_id, producer_epoch=0, base_sequence=sequence
    )


def test_an_abort_starts_at_its_first_batch() -> None:
    partitions = PartitionTransactions()
    partitions.appended(STREAM, PRODUCER, 12)
    assert partitions.aborted_from(STREAM, PRODUCER, start=10, marker_offset=15) == 12


def test_an_abort_with_no_batch_here_never_reaches_back_over_the_previous_commit() -> None:
    """The coordinator's ``start`` for a stream led elsewhere is its end as the database last
    recorded it: here 38, while the previous transaction's records (38, 39) and COMMIT marker (40)
    were only in the leader's WAL."""
    partitions = PartitionTransactions()
    partitions.appended(STREAM, PRODUCER, 38)
    partitions.end(STREAM, PRODUCER, 40, committed=True)  # the COMMIT marker of the transaction at 38-39
    assert partitions.aborted_from(STREAM, PRODUCER, start=38, marker_offset=41) == 41


def test_a_first_batch_rebuilt_from_a_stale_start_is_bounded_by_the_previous_marker_too() -> None:
    partitions = PartitionTransactions()
    partitions.committed(STREAM, PRODUCER, 40)
    partitions.appended(STREAM, PRODUCER, 38)  # rebuilt from the coordinator's lower bound
    assert partitions.aborted_from(STREAM, PRODUCER, start=38, marker_offset=45) == 41
    assert partitions.last_stable_offset(STREAM, 46) == 38  # the lower bound only holds the LSO back


def test_an_abort_may_reach_back_over_an_earlier_abort_marker() -> None:
    """Over an ABORT marker it hides only records aborted already; and the marker may be this
    transaction's own, appended by a leader that failed before it stored the entry."""
    partitions = PartitionTransactions()
    partitions.appended(STREAM, PRODUCER, 41)
    partitions.end(STREAM, PRODUCER, 43, committed=False)
    assert partitions.aborted_from(STREAM, PRODUCER, start=41, marker_offset=44) == 41


def test_without_a_batch_or_a_start_the_entry_is_the_marker_alone() -> None:
    assert PartitionTransactions().aborted_from(STREAM, PRODUCER, start=None, marker_offset=9) == 9


def test_other_producers_markers_do_not_bound_it() -> None:
    partitions = PartitionTransactions()
    partitions.end(STREAM, PRODUCER + 1, 40, committed=True)
    assert partitions.aborted_from(STREAM, PRODUCER, start=30, marker_offset=41) == 30


async def a_committed_transaction(broker: Any) -> tuple[Any, int]:
    """A partition's store and stream holding a committed transaction of PRODUCER: 0-1, COMMIT 2."""
    await broker.topics.create("t", 1, {})
    stream = broker.topics.get("t").streams[0]
    await broker.store.append(stream, data(0), 2)
    await broker.store.append(stream, build_control_batch(ControlType.COMMIT, PRODUCER, 0), 1)
    return broker.store, stream


async def reopened_from_0(broker: Any, stream: int) -> Any:
    """The broker's participants after they rebuilt PRODUCER's open transaction in ``stream`` as a
    new leader does, from the coordinator's lower bound 0."""
    participants = broker.transactions.participants
    participants.partitions.forget_stream(stream)
    await participants._reopen(stream, PRODUCER, 0)
    return participants


async def test_a_new_leader_rebuilds_an_open_transaction_from_the_log_not_from_the_stale_start(
    broker_service: Any,
) -> None:
    """The coordinator says the producer's transaction joined the stream at 0, a lower bound from
    before its previous, committed transaction (offsets 0-1, COMMIT marker at 2). The leader that
    gains the stream reads the log from there: the open transaction starts at its first batch (3),
    and its abort (retried: the failed leader appended an ABORT marker at 5 but stored no entry)
    covers 3-4 and cannot reach back over offsets 0-2."""
    store, stream = await a_committed_transaction(broker_service)
    await store.append(stream, data(2), 2)
    await store.append(stream, build_control_batch(ControlType.ABORT, PRODUCER, 0), 1)  # its own
    participants = await reopened_from_0(broker_service, stream)
    assert participants.partitions.first_offset(stream, PRODUCER) == 3
    assert participants.partitions.aborted_from(stream, PRODUCER, start=0, marker_offset=6) == 3


async def test_a_new_leader_counts_a_transaction_closed_by_an_abort_whose_entry_is_stored(
    broker_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transaction at 3-4 was aborted (its marker at 5, its entry 3-5 stored by the leader that
    wrote it), and its coordinator has not yet recorded it complete: the row, still PrepareAbort,
    names the stream. The leader that gains the stream then must not count it open, since no
    marker comes again to close it: the last stable offset would stay at 3 for good."""
    store, stream = await a_committed_transaction(broker_service)
    await store.append(stream, data(2), 2)
    await store.append(stream, build_control_batch(ControlType.ABORT, PRODUCER, 0), 1)
    participants = broker_service.transactions.participants
    stored = ([(stream, PRODUCER, 0)], [(stream, PRODUCER, 3, 5)])
    monkeypatch.setattr(participants._store, "load_for_streams", lambda ids: stored)
    await participants.partitions_gained([stream])
    assert participants.partitions.first_offset(stream, PRODUCER) is None
    assert participants.partitions.last_stable_offset(stream, 6) == 6
    assert participants.partitions.aborted_between(stream, 0, 6) == [(PRODUCER, 3)]


async def test_a_rebuild_from_a_start_retention_trimmed_reads_from_the_streams_start(
    broker_service: Any,
) -> None:
    """The coordinator's lower bound (0) lies before what retention kept (3 on): the log is read
    from its start, so the open transaction starts at its first batch, not at the trimmed bound
    that would hold the last stable offset back over nothing."""
    store, stream = await a_committed_transaction(broker_service)
    await store.trim(stream, 3)
    await store.append(stream, data(2), 2)
    participants = await reopened_from_0(broker_service, stream)
    assert participants.partitions.first_offset(stream, PRODUCER) == 3


async def test_a_new_leader_reads_the_tails_of_open_transactions_several_at_once(
    broker_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker gaining partitions from a failed leader reads each open transaction's tail from
    object storage; one after another, a thousand of them at tens of milliseconds each would keep
    the partitions from serving for tens of seconds."""
    broker = broker_service
    await broker.topics.create("t", 8, {})
    streams = broker.topics.get("t").streams
    for producer, stream in enumerate(streams, start=PRODUCER):
        await broker.store.append(stream, data(0, producer), 2)
    reading, most = 0, 0
    fetch = broker.store.fetch

    async def slow_fetch(*args: Any, **kwargs: Any) -> Any:
        nonlocal reading, most
        reading += 1
        most = max(most, reading)
        await asyncio.sleep(0.05)  # the subject: reads slow enough to overlap unless bounded
        reading -= 1
        return await fetch(*args, **kwargs)

    participants = broker.transactions.participants
    open_txns = [(stream, producer, 0) for producer, stream in enumerate(streams, start=PRODUCER)]
    monkeypatch.setattr(participants._store, "load_for_streams", lambda ids: (open_txns, []))
    monkeypatch.setattr(broker.store, "fetch", slow_fetch)
    await participants.partitions_gained(streams)
    assert most == len(streams)
    for producer, stream in enumerate(streams, start=PRODUCER):
        assert participants.partitions.first_offset(stream, producer) == 0


async def test_a_marker_whose_request_is_cut_off_still_closes_the_transaction_at_the_leader(
    broker_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator's WriteTxnMarkers connection closes (the handler is cancelled) after the
    ABORT marker was appended, while its aborted entry is being stored. The marker is in the log
    and the entry in the database: the transaction must be closed here too, or it holds the last
    stable offset back until the coordinator's retry."""
    await broker_service.topics.create("t", 1, {})
    stream = broker_service.topics.get("t").streams[0]
    await broker_service.store.append(stream, data(0), 2)
    participants = broker_service.transactions.participants
    participants.partitions.appended(stream, PRODUCER, 0)
    storing, release = threading.Event(), threading.Event()
    add_aborted = participants._store.add_aborted

    def slow_add_aborted(entries: list[tuple[int, int, int, int]]) -> None:
        storing.set()
        release.wait(5)
        add_aborted(entries)

    monkeypatch.setattr(participants._store, "add_aborted", slow_add_aborted)
    request = asyncio.create_task(participants.write_marker(stream, PRODUCER, 0, commit=False))
    await wait_until(storing.is_set, message="the aborted entry being stored")
    request.cancel()  # the coordinator's connection closed
    with pytest.raises(asyncio.CancelledError):
        await request
    release.set()
    await wait_until(
        lambda: participants.partitions.first_offset(stream, PRODUCER) is None,
        timeout=3,
        message="the transaction closed at the leader",
    )
    assert participants.partitions.last_stable_offset(stream, 3) == 3
    assert participants.partitions.aborted_between(stream, 0, 3) == [(PRODUCER, 0)]
