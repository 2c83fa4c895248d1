"""A partition leader's verification of transactional produces in a cluster
(:mod:`tabletopic.broker.transactions.verification`), against a row store whose reads the test
holds and releases: the produces of one transaction share a read, and a read that began before a
marker vouches for nothing after it. And the coordinator's side of AddPartitionsToTxn: one query
for the recorded ends of the partitions other brokers lead."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any, cast

from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.model import TxnMetadata, TxnPartition, TxnState
from tabletopic.broker.transactions.participants import Participants
from tabletopic.broker.transactions.ports import TxnBroker
from tabletopic.broker.transactions.store import TxnStore
from tabletopic.broker.transactions.verification import ProduceVerifier
from tests.support.waiting import wait_until

TID, PID, EPOCH = "copy-1", 7, 0


def ongoing(*partitions: int) -> TxnMetadata:
    return TxnMetadata(
        TID,
        PID,
        EPOCH,
        TxnState.ONGOING,
        60_000,
        partitions={("t", p): TxnPartition("t", p, 100 + p, 0) for p in partitions},
    )


class HeldRows:
    """``load_one`` answers the row as it is when the test releases the read."""

    def __init__(self, row: TxnMetadata | None) -> None:
        self.row = row
        self.reads = 0
        self.waiting = 0
        self._release = threading.Semaphore(0)
        self._lock = threading.Lock()

    def load_one(self, transactional_id: str) -> TxnMetadata | None:
        with self._lock:
            self.reads += 1
            self.waiting += 1
        self._release.acquire(timeout=10)
        with self._lock:
            self.waiting -= 1
        return self.row

    def release(self, reads: int = 1) -> None:
        for _ in range(reads):
            self._release.release()


def verifier_over(rows: HeldRows) -> ProduceVerifier:
    return ProduceVerifier(cast(TxnStore, cast(Any, rows)))


def verify(verifier: ProduceVerifier, partition: int) -> asyncio.Task[ErrorCode]:
    return asyncio.ensure_future(verifier.verify(TID, PID, EPOCH, 100 + partition, "t", partition))


async def test_the_partitions_of_one_produce_share_one_read_of_the_row() -> None:
    rows = HeldRows(ongoing(0, 1, 2, 3))
    verifier = verifier_over(rows)
    produces = [verify(verifier, p) for p in range(4)]
    await wait_until(lambda: rows.waiting == 1, message="the first read under way")
    rows.release()
    assert await asyncio.gather(*produces) == [ErrorCode.none] * 4
    assert rows.reads == 1
    # Kept until the marker: the next batches of the transaction read nothing.
    assert await verify(verifier, 2) is ErrorCode.none
    assert rows.reads == 1


async def test_a_partition_added_after_a_shared_read_began_is_read_again_not_refused() -> None:
    rows = HeldRows(ongoing(0))
    verifier = verifier_over(rows)
    first = verify(verifier, 0)
    await wait_until(lambda: rows.waiting == 1, message="the first read under way")
    # AddPartitionsToTxn adds partition 1 while that read is out; its produce joins the read.
    late = verify(verifier, 1)
    await asyncio.sleep(0)  # one turn of the loop: the late produce reaches the read under way
    rows.release()
    assert await first is ErrorCode.none
    rows.row = ongoing(0, 1)
    await wait_until(lambda: rows.waiting == 1, message="the late produce's own read")
    rows.release()
    assert await late is ErrorCode.none
    assert rows.reads == 2


async def test_a_read_that_began_before_a_marker_lets_no_zombie_in_after_it() -> None:
    """A produce of the transaction delayed in the network arrives while a read of the row is out,
    and the transaction's abort marker is written meanwhile: the row read before the marker still
    says Ongoing, but the produce must be checked against the row as it is after the marker."""
    rows = HeldRows(ongoing(0, 1))
    verifier = verifier_over(rows)
    first = verify(verifier, 0)
    await wait_until(lambda: rows.waiting == 1, message="the first read under way")
    zombie = verify(verifier, 1)
    await asyncio.sleep(0)  # one turn of the loop: the zombie's produce reaches the read under way
    verifier.marker_begins()  # the abort marker of the transaction begins here
    rows.release()
    assert await first is ErrorCode.none  # read before the marker: answered, but not kept
    rows.row = TxnMetadata(TID, PID, EPOCH, TxnState.COMPLETE_ABORT, 60_000)
    await wait_until(lambda: rows.waiting == 1, message="the zombie's own read")
    rows.release()
    assert await zombie is ErrorCode.invalid_txn_state
    verifier.marker_written(100, PID)
    # Nothing kept from the read before the marker: partition 0 is read afresh, and refused.
    again = verify(verifier, 0)
    await wait_until(lambda: rows.waiting == 1, message="partition 0 read again")
    rows.release()
    assert await again is ErrorCode.invalid_txn_state
    assert rows.reads == 3


async def test_refusals_name_what_the_row_says() -> None:
    rows = HeldRows(ongoing(0))
    verifier = verifier_over(rows)
    rows.release(10)
    assert await verifier.verify(TID, PID + 1, EPOCH, 100, "t", 0) is ErrorCode.invalid_producer_id_mapping
    assert await verifier.verify(TID, PID, EPOCH, 105, "t", 5) is ErrorCode.invalid_txn_state
    rows.row = TxnMetadata(TID, PID, EPOCH + 1, TxnState.ONGOING, 60_000)
    assert await verifier.verify(TID, PID, EPOCH, 100, "t", 0) is ErrorCode.invalid_producer_epoch
    rows.row = None
    assert await verifier.verify(TID, PID, EPOCH, 100, "t", 0) is ErrorCode.invalid_producer_id_mapping


class RecordedEnds:
    """A cluster store that leads streams 100 and 101 and records the ends of the others."""

    owned_only = True

    def __init__(self) -> None:
        self.queries: list[list[int]] = []

    def is_open(self, stream_id: int) -> bool:
        return stream_id in (100, 101)

    def stream_info(self, stream_id: int) -> SimpleNamespace:
        return SimpleNamespace(end_offset=5)

    async def recorded_ends(self, stream_ids: list[int]) -> dict[int, int]:
        self.queries.append(sorted(stream_ids))
        return {stream_id: 40 for stream_id in stream_ids if stream_id != 107}  # 107 was deleted


async def test_add_partitions_reads_the_ends_of_partitions_led_elsewhere_in_one_query() -> None:
    store = RecordedEnds()
    topic = SimpleNamespace(partition_count=8, streams=list(range(100, 108)))
    broker = SimpleNamespace(
        store=store, topics=SimpleNamespace(get=lambda name: topic if name == "t" else None)
    )
    participants = Participants(cast(TxnBroker, broker), cast(TxnStore, None))
    participants.__dict__["_shared_store"] = store  # what the isinstance check finds in a cluster
    wanted = [("t", p) for p in range(8)] + [("t", 8), ("gone", 0)]
    found = await participants.joining(wanted)
    assert store.queries == [[102, 103, 104, 105, 106, 107]]
    assert found[:2] == [TxnPartition("t", 0, 100, 5), TxnPartition("t", 1, 101, 5)]
    assert found[2:7] == [TxnPartition("t", p, 100 + p, 40) for p in range(2, 7)]
    assert found[7:] == [None, None, None]
