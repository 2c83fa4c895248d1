"""Where an aborted transaction's entry in the aborted index starts. Readers skip the producer's
batches from that offset up to the ABORT marker, whatever markers lie between, so an entry starting
at or before the producer's previous marker would hide a committed transaction's records: a clean
run's copying pipeline lost four copies that way, committed but invisible read_committed."""

from __future__ import annotations

from typing import Any

from tabletopic.broker.transactions.partitions import PartitionTransactions
from tabletopic.records.encoder import Record, build_batch, build_control_batch
from tabletopic.records.transactions import ControlType

STREAM, PRODUCER = 7, 1000


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


async def test_a_new_leader_rebuilds_an_open_transaction_from_the_log_not_from_the_stale_start(
    broker_service: Any,
) -> None:
    """The coordinator says the producer's transaction joined the stream at 0, a lower bound from
    before its previous, committed transaction (offsets 0-1, COMMIT marker at 2). The leader that
    gains the stream reads the log from there: the open transaction starts at its first batch (3),
    and its abort (retried: the failed leader appended an ABORT marker at 5 but stored no entry)
    covers 3-4 and cannot reach back over offsets 0-2."""
    broker = broker_service
    await broker.topics.create("t", 1, {})
    stream = broker.topics.get("t").streams[0]
    store = broker.store

    def data(sequence: int) -> bytes:
        records = [Record(None, b"a"), Record(None, b"b")]
        return build_batch(
            records, transactional=True, producer_id=PRODUCER, producer_epoch=0, base_sequence=sequence
        )

    await store.append(stream, data(0), 2)
    await store.append(stream, build_control_batch(ControlType.COMMIT, PRODUCER, 0), 1)
    await store.append(stream, data(2), 2)
    await store.append(stream, build_control_batch(ControlType.ABORT, PRODUCER, 0), 1)  # its own
    participants = broker.transactions.participants
    participants.partitions.forget_stream(stream)
    await participants._reopen(stream, PRODUCER, 0)
    assert participants.partitions.first_offset(stream, PRODUCER) == 3
    assert participants.partitions.aborted_from(stream, PRODUCER, start=0, marker_offset=6) == 3
