"""The other side of a transaction: the partitions' leaders and the groups' coordinators.

A partition's leader keeps its open and aborted transactions (:class:`PartitionTransactions`),
appends the markers (here for its own coordinator, or asked by another broker's through
WriteTxnMarkers), refuses a marker from a deposed coordinator and, in a cluster, verifies a
transactional produce against the transaction's row. A group's coordinator commits a committed
transaction's offsets (:class:`GroupOffsets`), in a cluster from ``txn_pending_offsets`` where
TxnOffsetCommit left them.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.model import PendingOffset, TxnOffsets, TxnPartition, TxnState
from tabletopic.broker.transactions.partitions import PartitionTransactions
from tabletopic.broker.transactions.ports import TxnBroker
from tabletopic.broker.transactions.store import TxnStore
from tabletopic.crashpoints import crash_point
from tabletopic.records.encoder import build_control_batch
from tabletopic.records.transactions import ControlType
from tabletopic.s3stream.shared import SharedStreamStore
from tabletopic.s3stream.streams import StreamError

# Commits a transaction's pending group offsets: (group id, {(topic, partition): PendingOffset}).
OffsetCommitter = Callable[[str, dict[tuple[str, int], PendingOffset]], Awaitable[None]]
# The group coordinator's answer to whether a TxnOffsetCommit's member may commit now.
MemberCheck = Callable[[TxnOffsets], ErrorCode]


class TxnError(Exception):
    """A request the coordinator refuses, with the Kafka error code to answer."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupOffsets:
    """Commits transactions' group offsets through the group coordinator, once it is wired (it
    starts after the transaction coordinator: offsets of transactions recovery committed wait)."""

    def __init__(self) -> None:
        self._committer: OffsetCommitter | None = None
        self._check: MemberCheck | None = None
        self._unapplied: list[tuple[str, dict[tuple[str, int], PendingOffset]]] = []

    async def wire(self, committer: OffsetCommitter, check: MemberCheck) -> None:
        self._committer, self._check = committer, check
        unapplied, self._unapplied = self._unapplied, []
        for group_id, offsets in unapplied:
            await committer(group_id, offsets)

    def check_member(self, commit: TxnOffsets) -> None:
        """KIP-447's fence against zombies: a TxnOffsetCommit whose member has left the group, or
        whose generation the group has moved past, is refused (ILLEGAL_GENERATION,
        UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; librdkafka and the Java client abort the
        transaction). Otherwise a member stalled past a rebalance would commit the output and the
        offsets of records its partitions' new owner copies again. Raises TxnError."""
        code = ErrorCode.none if self._check is None else self._check(commit)
        if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress):
            raise TxnError(code, f"group {commit.group_id!r} is not coordinated here now: {code.name}")
        if code is not ErrorCode.none:
            raise TxnError(
                code,
                f"member {commit.member_id!r} of generation {commit.generation_id} may not commit "
                f"offsets of group {commit.group_id!r}: {code.name}",
            )

    async def commit(self, group_id: str, offsets: dict[tuple[str, int], PendingOffset]) -> None:
        if self._committer is None:
            self._unapplied.append((group_id, dict(offsets)))
        else:
            await self._committer(group_id, offsets)


class Participants:
    """Partition leaders' and group coordinators' part of transactions on this broker."""

    def __init__(self, broker: TxnBroker, store: TxnStore) -> None:
        self._broker = broker
        self._store = store
        self.partitions = PartitionTransactions()
        self.group_offsets = GroupOffsets()
        # Cluster mode: (stream id, producer id) -> (transactional id, epoch) a transactional
        # produce was verified for against the database, until its marker.
        self._verified: dict[tuple[int, int], tuple[str, int]] = {}
        # The newest coordinator epoch that wrote a marker for a producer id; a marker from an
        # older (deposed) coordinator is refused, as Kafka does.
        self._marker_epochs: dict[int, int] = {}

    async def joining(self, topic_name: str, index: int) -> TxnPartition | None:
        """Where the partition would join a transaction now (None: no such partition)."""
        topic = self._broker.topics.get(topic_name)
        if topic is None or not 0 <= index < topic.partition_count:
            return None
        stream_id = topic.streams[index]
        start = await self._stream_end(stream_id)
        return None if start is None else TxnPartition(topic_name, index, stream_id, start)

    @functools.cached_property
    def _shared_store(self) -> SharedStreamStore | None:
        """The broker's store if it is a cluster store, decided once: an isinstance check against
        a runtime Protocol tests every member (about 50 µs), too much for each partition added."""
        store = self._broker.store
        return store if isinstance(store, SharedStreamStore) else None

    async def _stream_end(self, stream_id: int) -> int | None:
        """A lower bound of any offset the transaction writes next in the stream: its end here,
        or (cluster, another broker leads it) its end as the metadata database last recorded it;
        None for a stream that does not exist."""
        store = self._broker.store
        shared = self._shared_store
        try:
            if shared is not None and shared.owned_only and not shared.is_open(stream_id):
                return await shared.recorded_end(stream_id)
            return store.stream_info(stream_id).end_offset
        except StreamError:
            return None

    async def partitions_gained(self, stream_ids: Sequence[int]) -> None:
        """Cluster mode: this broker now leads these streams; rebuild their open transactions
        (from every unfinished transaction that added them: the stream offset it joined at bounds
        the last stable offset until its marker) and their aborted index."""
        open_txns, aborted = await asyncio.to_thread(self._store.load_for_streams, list(stream_ids))
        for stream_id in stream_ids:
            self.partitions.forget_stream(stream_id)
        gained = set(stream_ids)
        for key in [k for k in self._verified if k[0] in gained]:
            del self._verified[key]
        for stream_id, pid, first, last in aborted:
            self.partitions.add_aborted(stream_id, pid, first, last)
        for stream_id, pid, start in open_txns:
            self.partitions.appended(stream_id, pid, start)

    async def write_marker(
        self,
        stream_id: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        start: int | None = None,
        coordinator_epoch: int = 0,
    ) -> int:
        """Append a transaction's COMMIT or ABORT marker to a stream this broker leads and close
        the transaction there (an abort enters the aborted index, from its first batch, else
        ``start``, else the marker). Returns the marker's offset. Raises StreamError."""
        control = ControlType.COMMIT if commit else ControlType.ABORT
        marker = build_control_batch(
            control, producer_id, producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=_now_ms()
        )
        offset = await self._broker.store.append(stream_id, marker, 1)
        self._broker.producers.note_append(stream_id, offset + 1)
        crash_point("transaction.marker")
        first = self.partitions.first_offset(stream_id, producer_id)
        if not commit:
            if first is not None:
                entry = (stream_id, producer_id, first, offset)
            else:
                first = offset if start is None else start
                entry = (stream_id, producer_id, first, offset)
                # Written again (a restart, a retry): the first marker's entry already covers the
                # records; it is stored again in case that is what failed.
                for pid, earlier_first, earlier_last in self.partitions.aborted_transactions(
                    stream_id, first, offset
                ):
                    if pid == producer_id:
                        entry = (stream_id, producer_id, earlier_first, earlier_last)
                        break
            # Durable before the last stable offset moves past the records: a reader on another
            # broker (the table coordinator) asks this leader for that offset and then reads the
            # aborted index from the database, so the entry must be there by then.
            await asyncio.to_thread(self._store.add_aborted, [entry])
            self.partitions.add_aborted(*entry)
        self.partitions.end(stream_id, producer_id)
        self._verified.pop((stream_id, producer_id), None)
        return offset

    def accept_marker(self, producer_id: int, coordinator_epoch: int) -> bool:
        """Refuse a marker from a coordinator older than one already seen for the producer (a
        deposed coordinator finishing late)."""
        if coordinator_epoch < self._marker_epochs.get(producer_id, -1):
            return False
        self._marker_epochs[producer_id] = coordinator_epoch
        return True

    async def verify_produce(
        self, transactional_id: str, producer_id: int, epoch: int, stream_id: int, topic: str, partition: int
    ) -> ErrorCode:
        """Cluster mode: the leader of the partition is usually not the transaction's coordinator,
        so it checks the transaction's row in the database (written by AddPartitionsToTxn before it
        answered) once per transaction and partition, as KIP-890's verification asks the
        coordinator; the marker ends what was verified."""
        if self._verified.get((stream_id, producer_id)) == (transactional_id, epoch):
            return ErrorCode.none
        txn = await asyncio.to_thread(self._store.load_one, transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch < txn.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if txn.state is not TxnState.ONGOING or (topic, partition) not in txn.partitions:
            return ErrorCode.invalid_txn_state
        self._verified[(stream_id, producer_id)] = (transactional_id, epoch)
        return ErrorCode.none

    async def keep_pending_offsets(self, commit: TxnOffsets) -> None:
        """Cluster mode, the group's coordinator: keep a transaction's offsets in the database
        until the transaction's coordinator tells the outcome. Raises TxnError."""
        group_id = commit.group_id
        if self._broker.leadership.group_coordinator(group_id) != self._broker.node_id:
            raise TxnError(ErrorCode.not_coordinator, f"this broker does not coordinate group {group_id}")
        refused = await asyncio.to_thread(self._store.add_pending_offsets, commit)
        if refused is not None:
            raise TxnError(ErrorCode[refused], f"offsets of group {group_id} refused: {refused}")

    async def apply_pending_offsets(
        self, producer_id: int, accept: Callable[[str], bool], commit: bool
    ) -> None:
        """Cluster mode, the group's coordinator: a transaction of ``producer_id`` ended; commit
        (or drop) the offsets it gave for the groups ``accept`` selects. Repeatable: the rows go
        only once the offsets are committed."""
        by_group = await asyncio.to_thread(self._store.pending_offsets, producer_id, accept)
        if commit:
            for group_id, offsets in by_group.items():
                await self.group_offsets.commit(group_id, offsets)
        await asyncio.to_thread(self._store.drop_pending_offsets, producer_id, list(by_group))
