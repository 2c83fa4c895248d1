"""The transaction coordinator through its APIs, in process: epochs and fencing, timeouts abort,
Describe/ListTransactions and DescribeProducers, the last stable offset and aborted list in Fetch,
durable state across a coordinator restart, EndTxn answered before its markers are written."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest
import sqlalchemy as sa
from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.coordinator import TransactionCoordinator
from tabletopic.broker.transactions.participants import TxnError
from tabletopic.records.encoder import Record, build_batch
from tests.support.broker_calls import call
from tests.support.kafka_requests import produce_request, request
from tests.support.waiting import wait_until


def _txn_batch(pid: int, epoch: int, sequence: int, value: bytes) -> bytes:
    return build_batch(
        [Record(None, value)],
        transactional=True,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


async def _open_txn(broker, tid: str = "t1"):  # type: ignore[no-untyped-def]
    await broker.topics.create("tx", 1, {})
    coordinator: TransactionCoordinator = broker.transactions
    pid, epoch = await coordinator.init_producer_id(tid, 60_000, -1, -1)
    assert (await coordinator.add_partitions(tid, pid, epoch, [("tx", 0)])) == {("tx", 0): ErrorCode.none}
    produce = produce_request("tx", 0, _txn_batch(pid, epoch, 0, b"a"))
    produce = dataclasses.replace(produce, transactional_id=tid)
    response = await call(broker, produce)
    assert response.responses[0].partition_responses[0].error_code is ErrorCode.none
    return coordinator, pid, epoch


async def test_open_transaction_holds_the_last_stable_offset_and_abort_lists_it(broker_service) -> None:  # type: ignore[no-untyped-def]
    coordinator, pid, epoch = await _open_txn(broker_service)
    stream = broker_service.stream_id("tx", 0)
    assert coordinator.partitions.last_stable_offset(stream, 1) == 0
    await coordinator.end_txn("t1", pid, epoch, commit=False)
    await coordinator.settled("t1", None)
    assert broker_service.high_watermark("tx", 0) == 2  # data + ABORT marker
    assert coordinator.partitions.last_stable_offset(stream, 2) == 2
    assert coordinator.partitions.aborted_between(stream, 0, 2) == [(pid, 0)]


async def test_new_producer_fences_the_old_one_and_aborts_its_transaction(broker_service) -> None:  # type: ignore[no-untyped-def]
    coordinator, pid, epoch = await _open_txn(broker_service)
    new_pid, new_epoch = await coordinator.init_producer_id("t1", 60_000, -1, -1)
    assert (new_pid, new_epoch) == (pid, epoch + 2)  # one bump to abort, one for the new producer
    try:
        await coordinator.end_txn("t1", pid, epoch, commit=True)
    except TxnError as exc:
        assert exc.code is ErrorCode.producer_fenced
    else:
        raise AssertionError("the zombie's commit was accepted")
    stale = produce_request("tx", 0, _txn_batch(pid, epoch, 1, b"zombie"))
    stale = dataclasses.replace(stale, transactional_id="t1")
    result = (await call(broker_service, stale)).responses[0].partition_responses[0]
    assert result.error_code is not ErrorCode.none


async def test_timed_out_transaction_is_aborted(broker_service) -> None:  # type: ignore[no-untyped-def]
    coordinator, _, _ = await _open_txn(broker_service)
    txn = coordinator.describe("t1")
    assert txn is not None and txn.state == "Ongoing"
    assert await coordinator.abort_timed_out(now_ms=txn.started_ms + 60_001) == 1
    assert coordinator.describe("t1").state == "CompleteAbort"  # type: ignore[union-attr]
    await coordinator.abort_timed_out(now_ms=txn.updated_ms + 604_800_001)  # transactional.id.expiration.ms
    assert coordinator.describe("t1") is None


async def test_describe_and_list_transactions_and_describe_producers(broker_service) -> None:  # type: ignore[no-untyped-def]
    _, pid, _ = await _open_txn(broker_service)
    described = await call(broker_service, request(65, 0, transactional_ids=["t1", "nope"]))
    first, missing = described.transaction_states
    assert (first.transaction_state, first.producer_id) == ("Ongoing", pid)
    assert [(t.topic, list(t.partitions)) for t in first.topics] == [("tx", [0])]
    assert missing.error_code is ErrorCode.transactional_id_not_found
    listed = await call(
        broker_service, request(66, 1, state_filters=["Ongoing"], producer_id_filters=[], duration_filter=-1)
    )
    assert [t.transactional_id for t in listed.transaction_states] == ["t1"]
    producers = await call(broker_service, request(61, 0, topics=[{"name": "tx", "partition_indexes": [0]}]))
    (active,) = producers.topics[0].partitions[0].active_producers
    assert (active.producer_id, active.current_txn_start_offset) == (pid, 0)


async def test_transaction_state_survives_a_coordinator_restart(broker_service) -> None:  # type: ignore[no-untyped-def]
    coordinator, pid, epoch = await _open_txn(broker_service)
    await coordinator.end_txn("t1", pid, epoch, commit=False)
    await coordinator.settled("t1", None)
    restarted = TransactionCoordinator(broker_service, coordinator.store.engine)
    await restarted.start()
    try:
        txn = restarted.describe("t1")
        assert txn is not None and (txn.state, txn.producer_id) == ("CompleteAbort", pid)
        stream = broker_service.stream_id("tx", 0)
        assert restarted.partitions.aborted_between(stream, 0, 2) == [(pid, 0)]
    finally:
        await restarted.stop()


async def test_end_txn_answers_before_the_markers_and_the_id_is_busy_until_they_land(broker_service) -> None:  # type: ignore[no-untyped-def]
    coordinator, pid, epoch = await _open_txn(broker_service)
    stream = broker_service.stream_id("tx", 0)
    store = broker_service.store
    release = asyncio.Event()
    append = store.append

    async def held_marker(stream_id: int, payload: object, record_count: int) -> int:
        await release.wait()  # a marker's WAL write that takes its time
        return await append(stream_id, payload, record_count)

    store.append = held_marker
    try:
        await asyncio.wait_for(coordinator.end_txn("t1", pid, epoch, commit=True), 5)
        assert coordinator.describe("t1").state == "PrepareCommit"  # type: ignore[union-attr]
        # read_committed readers stay behind the open transaction until its marker lands.
        assert coordinator.partitions.last_stable_offset(stream, 1) == 0
        # The producer's next transaction waits a moment, then is told to retry.
        started = asyncio.get_running_loop().time()
        for busy in (
            coordinator.add_partitions("t1", pid, epoch, [("tx", 0)]),
            coordinator.init_producer_id("t1", 60_000, pid, epoch),
        ):
            try:
                await busy
            except TxnError as exc:
                assert exc.code is ErrorCode.concurrent_transactions
            else:
                raise AssertionError("a call was served while the markers were being written")
        assert asyncio.get_running_loop().time() - started >= 0.8  # each waited a moment first
        # Markers written: the call that was waiting goes through without a retry.
        settling = asyncio.Event()
        settled = coordinator.settled

        async def noted_settled(transactional_id: str, wait_s: float | None = 5.0) -> None:
            settling.set()
            await settled(transactional_id, wait_s)

        coordinator.settled = noted_settled  # type: ignore[method-assign]
        waiting = asyncio.create_task(coordinator.add_partitions("t1", pid, epoch, [("tx", 0)]))
        await asyncio.wait_for(settling.wait(), 5)  # the call waits for the markers
        release.set()
        assert await asyncio.wait_for(waiting, 5) == {("tx", 0): ErrorCode.none}
    finally:
        release.set()
        store.append = append
    assert broker_service.high_watermark("tx", 0) == 2  # data + COMMIT marker
    assert coordinator.partitions.last_stable_offset(stream, 2) == 2
    assert coordinator.describe("t1").state == "Ongoing"  # type: ignore[union-attr]


async def test_a_transaction_costs_two_state_writes_when_the_next_one_follows(broker_service) -> None:  # type: ignore[no-untyped-def]
    coordinator, pid, epoch = await _open_txn(broker_service)
    saved: list[str] = []
    write_row = coordinator.store.write_row

    def counting_write(conn, transactional_id, row, fence):  # type: ignore[no-untyped-def]
        saved.append(row["state"])
        write_row(conn, transactional_id, row, fence)

    coordinator.store.write_row = counting_write
    for _ in range(3):
        await coordinator.end_txn("t1", pid, epoch, commit=True)
        await coordinator.add_partitions("t1", pid, epoch, [("tx", 0)])
    # PrepareCommit, then the next transaction's Ongoing row (the Complete state in between is
    # carried by it instead of a database commit of its own).
    assert saved == ["PrepareCommit", "Ongoing"] * 3
    assert broker_service.high_watermark("tx", 0) == 4  # the data and three COMMIT markers
    await coordinator.end_txn("t1", pid, epoch, commit=False)
    await coordinator.settled("t1", None)
    await coordinator.stop()  # a clean stop writes what was left unwritten
    assert coordinator.store.load_one("t1").state == "CompleteAbort"  # type: ignore[union-attr]


async def test_markers_that_fail_after_end_txn_was_answered_are_retried(broker_service) -> None:  # type: ignore[no-untyped-def]
    coordinator, pid, epoch = await _open_txn(broker_service)
    add_aborted = coordinator.store.add_aborted
    failures = []

    def flaky(entries):  # type: ignore[no-untyped-def]
        if not failures:
            failures.append(entries)
            raise OSError("database unavailable")
        add_aborted(entries)

    coordinator.store.add_aborted = flaky
    await coordinator.end_txn("t1", pid, epoch, commit=False)
    await asyncio.wait_for(coordinator.settled("t1", None), 5)
    assert failures and coordinator.describe("t1").state == "CompleteAbort"  # type: ignore[union-attr]
    stream = broker_service.stream_id("tx", 0)
    assert coordinator.partitions.aborted_between(stream, 0, 3) == [(pid, 0)]  # one entry, not two
    # Stored despite the failure, ending at the marker written again: the last stable offset did
    # not move past the records before the index held them.
    assert coordinator.store.load()[1] == [(stream, pid, 0, 2)]


async def test_a_fenced_producer_on_a_pre_kip_588_version_gets_invalid_producer_epoch(broker_service) -> None:  # type: ignore[no-untyped-def]
    """PRODUCER_FENCED (90) exists for the transaction APIs only from KIP-588's versions on
    (InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2; TxnOffsetCommit never);
    older clients get INVALID_PRODUCER_EPOCH (47), as Kafka answers them."""
    _coordinator, pid, epoch = await _open_txn(broker_service)
    await broker_service.transactions.init_producer_id("t1", 60_000, -1, -1)  # fences (pid, epoch)
    common = {"transactional_id": "t1", "producer_id": pid, "producer_epoch": epoch}
    offsets = [{"name": "tx", "partitions": [{"partition_index": 0, "committed_offset": 1,
                "committed_leader_epoch": -1, "committed_metadata": None}]}]  # fmt: skip
    add = {"v3_and_below_transactional_id": "t1", "v3_and_below_producer_id": pid,
           "v3_and_below_producer_epoch": epoch, "transactions": [],
           "v3_and_below_topics": [{"name": "tx", "partitions": [0]}]}  # fmt: skip
    txn_commit = {**common, "group_id": "g", "generation_id": -1, "member_id": "", "group_instance_id": None}
    calls = {
        26: lambda v: request(26, v, **common, committed=True),
        25: lambda v: request(25, v, **common, group_id="g"),
        24: lambda v: request(24, v, **add),
        28: lambda v: request(28, v, **txn_commit, topics=offsets),
    }

    def code_of(api_key: int, response) -> ErrorCode:  # type: ignore[no-untyped-def]
        if api_key == 24:
            return response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        if api_key == 28:
            return response.topics[0].partitions[0].error_code
        return response.error_code  # type: ignore[no-any-return]

    for api_key, build in calls.items():
        for version in range(4):
            # TxnOffsetCommit never gained PRODUCER_FENCED: 47 at every version.
            old = version < 2 or api_key == 28
            expected = ErrorCode.invalid_producer_epoch if old else ErrorCode.producer_fenced
            response = await call(broker_service, build(version))
            assert code_of(api_key, response) is expected, (api_key, version)
    # InitProducerId asking to bump a fenced (pid, epoch) (KIP-360, v3+): v3 predates KIP-588.
    for version, expected in ((3, ErrorCode.invalid_producer_epoch), (4, ErrorCode.producer_fenced)):
        init = request(22, version, transactional_id="t1", transaction_timeout=60_000, producer_id=pid,
                       producer_epoch=epoch)  # fmt: skip
        assert (await call(broker_service, init)).error_code is expected, version


async def test_a_request_cut_off_by_its_connection_goes_on_so_its_retry_is_not_answered_from_memory(  # type: ignore[no-untyped-def]
    broker_service,
) -> None:
    """The connection of an AddOffsetsToTxn closes (the server cancels its handler) while its row
    is being written, and the write then fails (PostgreSQL restarting). The group must not stay
    added in memory only: the retry on a new connection would be answered from it, and the group's
    coordinator, reading the row, refuses the TxnOffsetCommit that follows INVALID_TXN_STATE,
    fatal to the producer. A fault run's PostgreSQL restart did that to a copying pipeline."""
    coordinator, pid, epoch = await _open_txn(broker_service)
    entered, release = threading.Event(), threading.Event()
    write_row = coordinator.store.write_row

    def away_once(conn, transactional_id, row, fence):  # type: ignore[no-untyped-def]
        if not entered.is_set():
            entered.set()
            release.wait(5)
            raise sa.exc.OperationalError("UPDATE transactions", {}, Exception("terminating connection"))
        write_row(conn, transactional_id, row, fence)

    coordinator.store.write_row = away_once
    request = asyncio.create_task(coordinator.add_offsets("t1", pid, epoch, "copiers"))
    await wait_until(entered.is_set, message="the row's write under way")
    request.cancel()  # the connection closed
    with pytest.raises(asyncio.CancelledError):
        await request
    release.set()  # the write fails
    await coordinator.add_offsets("t1", pid, epoch, "copiers")  # the client's retry
    stored = coordinator.store.load_one("t1")
    assert stored is not None and "copiers" in stored.offsets
