"""The other side of a transaction: the partitions' leaders and the groups' coordinators.

A partition's leader keeps its open and aborted transactions (:class:`PartitionTransactions`),
appends the markers (here for its own coordinator, or asked by another broker's through
WriteTxnMarkers), refuses a marker from a deposed coordinator and, in a cluster, verifies a
transactional produce against the transaction's row (:mod:`.verification`). A group's coordinator
commits a committed transaction's offsets (:class:`GroupOffsets`), in a cluster from
``txn_pending_offsets`` where TxnOffsetCommit left them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.model import PendingOffset, TxnOffsets, TxnPartition
from tabletopic.broker.transactions.partitions import PartitionTransactions
from tabletopic.broker.transactions.ports import TxnBroker
from tabletopic.broker.transactions.store import TxnStore
from tabletopic.broker.transactions.verification import ProduceVerifier
from tabletopic.crashpoints import crash_point
from tabletopic.records.encoder import build_control_batch
from tabletopic.records.header import validate_batches
from tabletopic.records.transactions import ControlType, control_type_of
from tabletopic.s3stream.shared import SharedStreamStore
from tabletopic.s3stream.streams import StreamError, read_to_end
from tabletopic.tasks import gather_at_most, to_the_end

log = logging.getLogger(__name__)

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


# What a new leader reads at a time of a stream's tail to rebuild an open transaction, and how
# many such reads it runs at once (so at most 16 MiB read and not yet scanned).
_REOPEN_READ_BYTES = 1 << 20
_REOPENS_AT_ONCE = 16


class Participants:
    """Partition leaders' and group coordinators' part of transactions on this broker."""

    def __init__(self, broker: TxnBroker, store: TxnStore) -> None:
        self._broker = broker
        self._store = store
        self.partitions = PartitionTransactions()
        self.group_offsets = GroupOffsets()
        self.verifier = ProduceVerifier(store)
        # The newest coordinator epoch that wrote a marker for a producer id; a marker from an
        # older (deposed) coordinator is refused, as Kafka does.
        self._marker_epochs: dict[int, int] = {}

    async def joining(self, partitions: Sequence[tuple[str, int]]) -> list[TxnPartition | None]:
        """Where each partition would join a transaction now (None: no such partition), at a lower
        bound of any offset the transaction writes next in its stream: the stream's end here, or
        (cluster, another broker leads it) its end as the metadata database last recorded it. The
        streams led elsewhere are read in one query: a transaction usually adds all its partitions
        in one AddPartitionsToTxn, and its producer waits for the answer before it writes."""
        located = [(topic, index, self._stream_of(topic, index)) for topic, index in partitions]
        stream_ids = {stream_id for _, _, stream_id in located if stream_id is not None}
        shared = self._shared_store
        elsewhere = [
            stream_id
            for stream_id in stream_ids
            if shared is not None and shared.owned_only and not shared.is_open(stream_id)
        ]
        ends = await shared.recorded_ends(elsewhere) if shared is not None and elsewhere else {}
        for stream_id in stream_ids.difference(elsewhere):
            try:
                ends[stream_id] = self._broker.store.stream_info(stream_id).end_offset
            except StreamError:
                pass  # deleted meanwhile: no such partition
        return [
            TxnPartition(topic_name, index, stream_id, ends[stream_id])
            if stream_id is not None and stream_id in ends
            else None
            for topic_name, index, stream_id in located
        ]

    def _stream_of(self, topic_name: str, index: int) -> int | None:
        topic = self._broker.topics.get(topic_name)
        return topic.streams[index] if topic is not None and 0 <= index < topic.partition_count else None

    @functools.cached_property
    def _shared_store(self) -> SharedStreamStore | None:
        """The broker's store if it is a cluster store, decided once: an isinstance check against
        a runtime Protocol tests every member (about 50 µs), too much for each partition added."""
        store = self._broker.store
        return store if isinstance(store, SharedStreamStore) else None

    async def partitions_gained(self, stream_ids: Sequence[int]) -> None:
        """Cluster mode: this broker now leads these streams; rebuild their open transactions
        (from every unfinished transaction that added them: the stream offset it joined at bounds
        the last stable offset until its marker) and their aborted index."""
        open_txns, aborted = await asyncio.to_thread(self._store.load_for_streams, list(stream_ids))
        for stream_id in stream_ids:
            self.partitions.forget_stream(stream_id)
        self.verifier.forget_streams(set(stream_ids))
        for stream_id, pid, first, last in aborted:
            self.partitions.add_aborted(stream_id, pid, first, last)
        # Each reopen reads a stream tail, from object storage on a broker that just gained it:
        # several at once, as producer state is replayed, with memory bounded by the chunk size.
        reopens = [functools.partial(self._reopen, *txn) for txn in open_txns]
        await gather_at_most(_REOPENS_AT_ONCE, reopens)

    async def _reopen(self, stream_id: int, producer_id: int, start: int) -> None:
        """Rebuild a producer's open transaction in a stream gained from another leader. ``start``
        (where its coordinator says it joined) is a lower bound that may lie before the producer's
        previous, committed transaction in this stream, so the log from there is read: the
        producer's last COMMIT marker is noted, and the open transaction starts at the producer's
        first transactional batch after it (none: nothing to hold back until one comes). An ABORT
        marker whose entry the aborted index holds (loaded before this) ends the transaction as a
        COMMIT marker does: its coordinator counts its markers written and may not have recorded
        the transaction complete yet, so the row still names this stream, and no marker would come
        again to close it. An ABORT marker without its entry does not move that start: it may be
        this very transaction's, appended by the leader that failed before it stored the entry,
        which the coordinator's retry then stores from the first batch."""
        last_commit: int | None = None
        first: int | None = None
        try:
            async for stored in read_to_end(self._broker.store, stream_id, start, _REOPEN_READ_BYTES):
                for header in validate_batches(stored.payload, verify_crc=False):
                    if header.producer_id != producer_id or not header.is_transactional:
                        continue
                    if not header.is_control:
                        first = stored.base_offset if first is None else first
                    elif control_type_of(stored.payload, header) == ControlType.COMMIT:
                        last_commit, first = stored.base_offset, None
                    elif self.partitions.aborted_by(stream_id, producer_id, stored.base_offset):
                        first = None
        except (StreamError, ValueError):
            # Unreadable here: keep the coordinator's lower bound, which only holds the last
            # stable offset back.
            self.partitions.appended(stream_id, producer_id, start)
            return
        if last_commit is not None:
            self.partitions.committed(stream_id, producer_id, last_commit)
            if first is not None:
                self.partitions.appended(stream_id, producer_id, first)
        else:
            self.partitions.appended(stream_id, producer_id, start if first is None else first)

    @to_the_end
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
        ``start``, else the marker). Returns the marker's offset. Raises StreamError.

        Runs to its end if its caller is cancelled (the server lets a closed connection's
        WriteTxnMarkers finish; this covers any other cancellation): cut off after the append,
        the transaction would stay open here, holding the last stable offset back, until the
        coordinator's retry."""
        control = ControlType.COMMIT if commit else ControlType.ABORT
        self.verifier.marker_begins()
        marker = build_control_batch(
            control, producer_id, producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=_now_ms()
        )
        offset = await self._broker.store.append(stream_id, marker, 1)
        self._broker.producers.note_append(stream_id, offset + 1)
        crash_point("transaction.marker")
        known_first = self.partitions.first_offset(stream_id, producer_id)
        if not commit:
            first = self.partitions.aborted_from(stream_id, producer_id, start, offset)
            entry = (stream_id, producer_id, first, offset)
            if known_first is None:
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
        self.partitions.end(stream_id, producer_id, offset, committed=commit)
        self.verifier.marker_written(stream_id, producer_id)
        return offset

    def accept_marker(self, producer_id: int, coordinator_epoch: int) -> bool:
        """Refuse a marker from a coordinator older than one already seen for the producer (a
        deposed coordinator finishing late)."""
        if coordinator_epoch < self._marker_epochs.get(producer_id, -1):
            return False
        self._marker_epochs[producer_id] = coordinator_epoch
        return True

    async def keep_pending_offsets(self, commit: TxnOffsets) -> None:
        """Cluster mode, the group's coordinator: keep a transaction's offsets in the database
        until the transaction's coordinator tells the outcome. Raises TxnError."""
        group_id = commit.group_id
        if self._broker.leadership.group_coordinator(group_id) != self._broker.node_id:
            raise TxnError(ErrorCode.not_coordinator, f"this broker does not coordinate group {group_id}")
        refused = await asyncio.to_thread(self._store.add_pending_offsets, commit)
        if refused is not None:
            code, why = refused
            message = f"offsets of group {group_id} for {commit.transactional_id} refused ({code}): {why}"
            log.info("TxnOffsetCommit %s", message)
            raise TxnError(ErrorCode[code], message)

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
