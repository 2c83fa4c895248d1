"""The transaction coordinator: one state machine per transactional id, made durable in the
metadata database before it acts (see :mod:`tabletopic.broker.transactions.store`).

Ending a transaction: the PrepareCommit / PrepareAbort state is committed first and EndTxn is
answered then, as Kafka answers once the prepare record is in the transaction log; in the
background a marker is appended to every partition of the transaction, aborted ranges are recorded
in the aborted index, pending group offsets are committed (commit only), and the Complete state is
committed. Until then the transactional id is busy: a call on it (the producer's next
AddPartitionsToTxn, a new InitProducerId) first waits a moment for the markers, since they usually
take a WAL write or two, and is answered CONCURRENT_TRANSACTIONS (which clients retry) if they are
not done by then; read_committed consumers stay behind the last stable offset until each marker
lands. Each step may be repeated after a crash: the recovery at start finishes every Prepare state
and aborts every Ongoing transaction, before the broker serves, so no transaction is ever half
visible.

A newer InitProducerId for the same transactional id bumps the epoch and aborts the open
transaction: the old producer (a zombie) is fenced from then on, at the coordinator and in Produce.

Which broker coordinates a transactional id is answered by FindCoordinator (key type 1) exactly
like a group: :func:`coordinator_key` is the one place that decides which key maps where.

In cluster mode (:class:`~tabletopic.broker.transactions.cluster.TxnCluster` attached) a broker
coordinates only the transactional ids of the coordinator slots it leads: it loads their state when
it gains a slot (finishing Prepare states, keeping Ongoing ones, which time out as usual), writes
every state change only while the database says it still leads the slot at the epoch it loaded it
with, and writes the markers of partitions other brokers lead through those leaders
(WriteTxnMarkers). The partition side (last stable offset, aborted index, which producer may
write) is kept by each partition's leader.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Connection, Engine

from tabletopic.broker.groups.store import GroupFenced
from tabletopic.broker.leadership import GROUP_SLOTS_TOPIC
from tabletopic.broker.transactions import settings
from tabletopic.broker.transactions.partitions import PartitionTransactions
from tabletopic.broker.transactions.row_writer import RowWriter
from tabletopic.broker.transactions.store import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PendingOffset,
    TxnFenced,
    TxnMetadata,
    TxnPartition,
    TxnStore,
    row_of,
)
from tabletopic.crashpoints import crash_point
from tabletopic.records.encoder import build_control_batch
from tabletopic.records.transactions import ControlType
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.s3stream.streams import StreamError
from tabletopic.tasks import cancel_and_wait

if TYPE_CHECKING:
    from tabletopic.broker.ports import TxnHost
    from tabletopic.broker.transactions.cluster import TxnCluster

log = logging.getLogger(__name__)

MAX_EPOCH = 32767
# How long a call on a transactional id whose markers are being written waits for them before it is
# answered CONCURRENT_TRANSACTIONS: long enough for a WAL write (the usual case, answered without a
# client retry and its back-off), short enough that a marker held up by a leader failing over does
# not hold the client's request.
COMPLETION_WAIT_S = 0.5
# How long a single node leaves a Complete state unwritten when its markers are in: the producer's
# next AddPartitionsToTxn usually comes first and its Ongoing row replaces it (one database commit
# per transaction fewer). Losing it to a crash only makes the restart write the markers once more.
COMPLETE_SAVE_DELAY_S = 1.0
# Commits a transaction's pending group offsets: (group id, {(topic, partition): PendingOffset}).
OffsetCommitter = Callable[[str, dict[tuple[str, int], PendingOffset]], Awaitable[None]]


class TxnError(Exception):
    """A request the coordinator refuses, with the Kafka error code to answer."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def coordinator_key(transactional_id: str) -> str:
    """The key FindCoordinator maps to a broker; cluster mode spreads these over brokers."""
    return transactional_id


def _now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(self, broker: TxnHost, engine: Engine) -> None:
        self._broker = broker
        self.store = TxnStore(engine)
        self._writer = RowWriter(engine, "transaction-rows")
        self.partitions = PartitionTransactions()
        self._offset_committer: OffsetCommitter | None = None
        # Offsets of transactions committed during recovery, before the groups were wired.
        self._unapplied: list[tuple[str, dict[tuple[str, int], PendingOffset]]] = []
        self._txns: dict[str, TxnMetadata] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # (stream id, producer id) -> transactional id, for Produce's membership check.
        self._open: dict[tuple[int, int], str] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready = False
        # Cluster mode: the slots this broker coordinates, with the leader epoch it loaded them at.
        self._cluster: TxnCluster | None = None
        self._slots: dict[int, int] = {}
        self._loading: set[int] = set()
        self._background: set[asyncio.Task[None]] = set()
        # Transactional id -> the task writing the markers of its Prepare state (EndTxn answered).
        self._completing: dict[str, asyncio.Task[None]] = {}
        # Single node: transactions recorded Complete in memory whose row still says Prepare.
        self._unsaved: dict[str, TxnMetadata] = {}
        # Cluster mode, partition side: (stream id, producer id) -> (transactional id, epoch) a
        # transactional produce was verified for against the database, until its marker.
        self._verified: dict[tuple[int, int], tuple[str, int]] = {}
        # Partition side: the newest coordinator epoch that wrote a marker for a producer id; a
        # marker from an older (deposed) coordinator is refused, as Kafka does.
        self._marker_epochs: dict[int, int] = {}

    # --- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        await asyncio.to_thread(self.store.migrate)
        interval = self._broker.config.get(settings.ABORT_CHECK_INTERVAL.name) / 1000
        if self._broker.clustered:
            # Nothing is recovered here: each slot's state is loaded by the broker that gains it,
            # and each partition's open and aborted transactions by its leader.
            self._ready = True
            self._task = asyncio.create_task(self._expire_loop(interval), name="transaction-timeouts")
            return
        txns, aborted = await asyncio.to_thread(self.store.load)
        for stream_id, pid, first, last in aborted:
            self.partitions.add_aborted(stream_id, pid, first, last)
        for txn in txns:
            self._txns[txn.transactional_id] = txn
        for txn in txns:
            if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
                log.info("finishing %s of transaction %s after restart", txn.state, txn.transactional_id)
                await self._complete(txn)
            elif txn.state == ONGOING:
                log.info("aborting transaction %s left open by a restart", txn.transactional_id)
                await self._abort(txn, bump_epoch=True)
        self._ready = True
        self._task = asyncio.create_task(self._expire_loop(interval), name="transaction-timeouts")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        if self._completing:
            # Let answered transactions finish their markers; what is cut short is finished by the
            # next start (the Prepare state is durable).
            await asyncio.wait(list(self._completing.values()), timeout=COMPLETION_WAIT_S * 4)
        for txn in list(self._unsaved.values()):
            async with self._lock(txn.transactional_id):
                if self._unsaved.get(txn.transactional_id) is txn:
                    await self._save(txn)
        await cancel_and_wait(list(self._background))
        await self._writer.close()

    async def set_offset_committer(self, committer: OffsetCommitter) -> None:
        """Wire the group coordinator (started after this one); commits the offsets of
        transactions that recovery completed before it existed."""
        self._offset_committer = committer
        unapplied, self._unapplied = self._unapplied, []
        for group_id, offsets in unapplied:
            await committer(group_id, offsets)

    # --- cluster mode -----------------------------------------------------------------------------
    def attach_cluster(self, cluster: TxnCluster) -> None:
        """Coordinate only the slots ``cluster`` says this broker leads (from now on)."""
        self._cluster = cluster

    def owns(self, transactional_id: str) -> bool:
        """Whether this broker coordinates ``transactional_id`` (always, on a single node)."""
        if not self._broker.clustered:
            return True
        return self._cluster is not None and self._cluster.slot(transactional_id) in self._slots

    async def slots_gained(self, slots: dict[int, int]) -> None:
        """Take over coordinator slots (``{slot: leader epoch}``): load their transactions, finish
        those a previous coordinator left in a Prepare state, keep Ongoing ones (they go on with
        this coordinator or time out)."""
        cluster = self._cluster
        assert cluster is not None
        self._loading.update(slots)
        self._slots.update(slots)
        try:
            txns = await asyncio.to_thread(
                self.store.load_transactions, lambda tid: cluster.slot(tid) in slots
            )
        except Exception:
            for slot in slots:
                self._slots.pop(slot, None)
            raise
        finally:
            self._loading.difference_update(slots)
        unfinished = []
        for txn in txns:
            if cluster.slot(txn.transactional_id) in self._slots:
                self._txns[txn.transactional_id] = txn
                if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
                    unfinished.append(txn)
        log.info("coordinating transaction slots %s: %d transactional ids", sorted(slots), len(txns))
        for txn in unfinished:
            log.info("finishing %s of transaction %s taken over", txn.state, txn.transactional_id)
            self._complete_later(txn)

    def slots_lost(self, slots: set[int]) -> None:
        """Another broker coordinates these slots now: forget their transactions."""
        cluster = self._cluster
        if cluster is None:
            return
        for slot in slots:
            self._slots.pop(slot, None)
        for tid in [t for t in self._txns if cluster.slot(t) in slots]:
            del self._txns[tid]
            self._locks.pop(tid, None)

    async def partitions_gained(self, stream_ids: Sequence[int]) -> None:
        """Cluster mode, partition side: this broker now leads these streams; rebuild their open
        transactions (from every unfinished transaction that added them: the stream offset it
        joined at bounds the last stable offset until its marker) and their aborted index."""
        open_txns, aborted = await asyncio.to_thread(self.store.load_for_streams, list(stream_ids))
        for stream_id in stream_ids:
            self.partitions.forget_stream(stream_id)
        for key in [k for k in self._verified if k[0] in set(stream_ids)]:
            del self._verified[key]
        for stream_id, pid, first, last in aborted:
            self.partitions.add_aborted(stream_id, pid, first, last)
        for stream_id, pid, start in open_txns:
            self.partitions.appended(stream_id, pid, start)

    def _complete_later(self, txn: TxnMetadata) -> None:
        """Finish ``txn``'s Prepare state in the background (after EndTxn was answered, or for a
        slot taken over); calls on its transactional id meanwhile wait for it (:meth:`settled`)."""
        tid = txn.transactional_id
        task = asyncio.create_task(self._finish(txn), name=f"transaction-finish-{tid}")
        self._background.add(task)
        self._completing[tid] = task

        def done(finished: asyncio.Task[None]) -> None:
            self._background.discard(finished)
            if self._completing.get(tid) is finished:
                del self._completing[tid]

        task.add_done_callback(done)

    async def _finish(self, txn: TxnMetadata) -> None:
        """The markers first, without the transactional id's lock (they are what a waiting call
        waits for, and calls that do not wait see the Prepare state and are refused), then the
        Complete state under the lock, so no other change of the row is written meanwhile."""
        tid = txn.transactional_id
        delay = 0.1
        while self._txns.get(tid) is txn and txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
            try:
                await self._write_markers(txn)
                async with self._lock(tid):
                    if self._txns.get(tid) is txn and txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
                        await self._record_complete(txn, durable=False)
                return
            except TxnError as exc:
                log.info("transaction %s not finished here: %s", tid, exc)
                return
            except Exception:
                # EndTxn was answered: the outcome stands and is retried (the id stays busy, its
                # calls answered CONCURRENT_TRANSACTIONS) until written, or finished by a restart.
                log.exception("finishing transaction %s failed; retrying in %.1f s", tid, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _save_later(self, txn: TxnMetadata) -> None:
        """Single node: write ``txn``'s Complete row unless another write of the row comes first."""
        tid = txn.transactional_id
        self._unsaved[tid] = txn

        async def save() -> None:
            await asyncio.sleep(COMPLETE_SAVE_DELAY_S)
            try:
                async with self._lock(tid):
                    if self._unsaved.get(tid) is txn:
                        await self._save(txn)
            except Exception:
                log.exception("recording transaction %s complete failed", tid)

        task = asyncio.create_task(save(), name=f"transaction-complete-{tid}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def settled(self, transactional_id: str, wait_s: float | None = COMPLETION_WAIT_S) -> None:
        """Wait (at most ``wait_s`` seconds; None: for as long as it takes) until the markers of an
        ended transaction of ``transactional_id`` are written. Returns either way: a call still
        finding the Prepare state answers CONCURRENT_TRANSACTIONS."""
        task = self._completing.get(transactional_id)
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=wait_s)

    def _check_owner(self, transactional_id: str) -> None:
        if not self._broker.clustered:
            return
        cluster = self._cluster
        slot = None if cluster is None else cluster.slot(transactional_id)
        if slot is not None and slot in self._loading:
            raise TxnError(ErrorCode.coordinator_load_in_progress, f"transaction slot {slot} is being loaded")
        if slot is None or slot not in self._slots:
            raise TxnError(
                ErrorCode.not_coordinator,
                f"this broker does not coordinate transactional id {transactional_id}",
            )

    async def _stream_end(self, stream_id: int) -> int | None:
        """A lower bound of any offset the transaction writes next in the stream: its end here,
        or (cluster, another broker leads it) its end as the metadata database last recorded it;
        None for a stream that does not exist."""
        store = self._broker.store
        try:
            if isinstance(store, S3StreamStore) and store.owned_only and not store.is_open(stream_id):
                return await store.recorded_end(stream_id)
            return store.stream_info(stream_id).end_offset
        except StreamError:
            return None

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        return self._locks.setdefault(transactional_id, asyncio.Lock())

    async def offsets_settled(self, group_ids: Sequence[str], require_stable: bool) -> None:
        """For OffsetFetch: wait (a moment at most) until no ended transaction still has offsets of
        these groups to commit, so a client that just committed a consume-transform-produce
        transaction reads its own offsets (Kafka's consumers ask with require_stable and retry on
        UNSTABLE_OFFSET_COMMIT; waiting here spares them the retry). In a cluster the group's
        offsets wait in ``txn_pending_offsets`` for the transaction's coordinator, usually another
        broker: with ``require_stable`` the rows are polled for the same moment."""
        wanted = set(group_ids)
        deadline = asyncio.get_running_loop().time() + COMPLETION_WAIT_S
        busy = [
            task
            for tid, task in self._completing.items()
            if not task.done() and (txn := self._txns.get(tid)) is not None and wanted & txn.offsets.keys()
        ]
        if busy:
            await asyncio.wait(busy, timeout=COMPLETION_WAIT_S)
        if not self._broker.clustered or not require_stable:
            return
        while await asyncio.to_thread(self.store.has_pending_offsets, list(wanted)):
            if asyncio.get_running_loop().time() >= deadline:
                return
            await asyncio.sleep(0.02)

    # --- the APIs -------------------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        """InitProducerId with a transactional id: ``(producer id, epoch)``. Raises TxnError."""
        max_timeout = int(self._broker.config.get(settings.MAX_TIMEOUT.name))
        if not 0 < timeout_ms <= max_timeout:
            raise TxnError(
                ErrorCode.invalid_transaction_timeout,
                f"transaction timeout {timeout_ms} ms is outside (0, {max_timeout}] "
                "(transaction.max.timeout.ms)",
            )
        self._check_owner(transactional_id)
        await self.settled(transactional_id)
        async with self._lock(transactional_id):
            self._check_owner(transactional_id)
            txn = self._txns.get(transactional_id)
            if txn is None:
                pid = await self._broker.allocate_producer_id()
                txn = TxnMetadata(transactional_id, pid, 0, EMPTY, timeout_ms, updated_ms=_now_ms())
                await self._save(txn)
                self._txns[transactional_id] = txn
                return txn.producer_id, txn.producer_epoch
            if producer_id >= 0 and (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
                # KIP-360: only the current producer may ask for its own epoch to be bumped.
                raise TxnError(
                    ErrorCode.producer_fenced, f"producer {producer_id} epoch {producer_epoch} is not current"
                )
            if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
                raise TxnError(
                    ErrorCode.concurrent_transactions, f"transaction {transactional_id} is still ending"
                )
            if txn.state == ONGOING:
                await self._abort(txn, bump_epoch=True)  # fences the previous producer
            await self._bump_epoch(txn)
            txn.timeout_ms = timeout_ms
            txn.state = EMPTY if txn.state == EMPTY else txn.state
            await self._save(txn)
            return txn.producer_id, txn.producer_epoch

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        wanted = list(partitions)
        await self.settled(transactional_id)
        async with self._lock(transactional_id):
            txn = self._current(transactional_id, producer_id, epoch)
            result: dict[tuple[str, int], ErrorCode] = {}
            added: list[TxnPartition] = []
            joining: list[tuple[str, int, int]] = []
            for topic_name, index in wanted:
                topic = self._broker.topics.get(topic_name)
                if topic is None or not 0 <= index < topic.partition_count:
                    result[(topic_name, index)] = ErrorCode.unknown_topic_or_partition
                    continue
                if (topic_name, index) not in txn.partitions:
                    joining.append((topic_name, index, topic.streams[index]))
                result[(topic_name, index)] = ErrorCode.none
            ends = await asyncio.gather(*(self._stream_end(sid) for _, _, sid in joining))
            for (topic_name, index, stream_id), start in zip(joining, ends, strict=True):
                if start is None:
                    result[(topic_name, index)] = ErrorCode.unknown_topic_or_partition
                else:
                    added.append(TxnPartition(topic_name, index, stream_id, start))
            if any(code is not ErrorCode.none for code in result.values()):
                # Kafka's rule: all or nothing; the others are answered OPERATION_NOT_ATTEMPTED.
                return {
                    key: code if code is not ErrorCode.none else ErrorCode.operation_not_attempted
                    for key, code in result.items()
                }
            if added:
                self._begin(txn)
                for part in added:
                    txn.partitions[(part.topic, part.partition)] = part
                await self._save(txn)
                for part in added:
                    self._open[(part.stream_id, txn.producer_id)] = transactional_id
            return result

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> None:
        """AddOffsetsToTxn: the group's offsets will be committed with the transaction."""
        await self.settled(transactional_id)
        async with self._lock(transactional_id):
            txn = self._current(transactional_id, producer_id, epoch)
            if group_id not in txn.offsets:
                self._begin(txn)
                txn.offsets[group_id] = {}
                await self._save(txn)

    async def txn_offset_commit(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        offsets: Sequence[PendingOffset],
    ) -> None:
        """TxnOffsetCommit: offsets held until the transaction commits (dropped if it aborts).
        In a cluster it is sent to the group's coordinator, which keeps them in the database
        until the transaction's coordinator tells it the outcome (WriteTxnMarkers for the group's
        slot, as Kafka's coordinator writes a marker to the group's __consumer_offsets partition)."""
        if self._broker.clustered:
            await self._keep_pending_offsets(transactional_id, producer_id, epoch, group_id, offsets)
            return
        async with self._lock(transactional_id):
            txn = self._current(transactional_id, producer_id, epoch)
            if group_id not in txn.offsets:
                raise TxnError(
                    ErrorCode.invalid_txn_state, f"group {group_id} was not added to the transaction"
                )
            pending = txn.offsets[group_id]
            for offset in offsets:
                pending[(offset.topic, offset.partition)] = offset
            await self._save(txn)

    async def _keep_pending_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        offsets: Sequence[PendingOffset],
    ) -> None:
        if self._broker.leadership.group_coordinator(group_id) != self._broker.node_id:
            raise TxnError(ErrorCode.not_coordinator, f"this broker does not coordinate group {group_id}")
        refused = await asyncio.to_thread(
            self.store.add_pending_offsets, transactional_id, producer_id, epoch, group_id, list(offsets)
        )
        if refused is not None:
            raise TxnError(ErrorCode[refused], f"offsets of group {group_id} refused: {refused}")

    async def apply_pending_offsets(
        self, producer_id: int, accept: Callable[[str], bool], commit: bool
    ) -> None:
        """Group side (cluster): a transaction of ``producer_id`` ended; commit (or drop) the
        offsets it gave for the groups ``accept`` selects (those this broker coordinates). Repeatable:
        the rows go only once the offsets are committed."""
        by_group = await asyncio.to_thread(self.store.pending_offsets, producer_id, accept)
        if commit:
            for group_id, offsets in by_group.items():
                if self._offset_committer is None:
                    self._unapplied.append((group_id, dict(offsets)))
                else:
                    await self._offset_committer(group_id, offsets)
        await asyncio.to_thread(self.store.drop_pending_offsets, producer_id, list(by_group))

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        """EndTxn: answered once the Prepare state is durable; the markers follow in the
        background (a retried EndTxn waits for them like any call on the id)."""
        self._check_owner(transactional_id)
        await self.settled(transactional_id)
        async with self._lock(transactional_id):
            self._check_owner(transactional_id)
            txn = self._txns.get(transactional_id)
            done = COMPLETE_COMMIT if commit else COMPLETE_ABORT
            if txn is not None and (txn.producer_id, txn.producer_epoch, txn.state) == (
                producer_id,
                epoch,
                done,
            ):
                return  # a retried EndTxn whose first attempt completed is answered as it was
            txn = self._current(transactional_id, producer_id, epoch, allow_empty=False)
            txn.state = PREPARE_COMMIT if commit else PREPARE_ABORT
            txn.updated_ms = _now_ms()
            await self._save(txn)
            crash_point("transaction.prepared")
            self._complete_later(txn)

    def check_produce(self, transactional_id: str, producer_id: int, epoch: int, stream_id: int) -> ErrorCode:
        """May this producer write a transactional batch to this stream now?"""
        txn = self._txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch < txn.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if txn.state != ONGOING or self._open.get((stream_id, producer_id)) != transactional_id:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    async def verify_produce(
        self, transactional_id: str, producer_id: int, epoch: int, stream_id: int, topic: str, partition: int
    ) -> ErrorCode:
        """:meth:`check_produce` on a node; in a cluster the leader of the partition is usually not
        the transaction's coordinator, so it checks the transaction's row in the database (written
        by AddPartitionsToTxn before it answered) once per transaction and partition, as KIP-890's
        verification asks the coordinator; the marker ends what was verified."""
        if not self._broker.clustered:
            return self.check_produce(transactional_id, producer_id, epoch, stream_id)
        if self._verified.get((stream_id, producer_id)) == (transactional_id, epoch):
            return ErrorCode.none
        txn = await asyncio.to_thread(self.store.load_one, transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch < txn.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if txn.state != ONGOING or (topic, partition) not in txn.partitions:
            return ErrorCode.invalid_txn_state
        self._verified[(stream_id, producer_id)] = (transactional_id, epoch)
        return ErrorCode.none

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def all(self) -> list[TxnMetadata]:
        return list(self._txns.values())

    # --- internals ------------------------------------------------------------------------------
    def _current(
        self, transactional_id: str, producer_id: int, epoch: int, allow_empty: bool = True
    ) -> TxnMetadata:
        if not self._ready:
            raise TxnError(ErrorCode.coordinator_load_in_progress, "transactions are being recovered")
        self._check_owner(transactional_id)
        txn = self._txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            raise TxnError(
                ErrorCode.invalid_producer_id_mapping,
                f"producer {producer_id} does not belong to transactional id {transactional_id}",
            )
        if epoch != txn.producer_epoch:
            raise TxnError(
                ErrorCode.producer_fenced,
                f"producer {producer_id} epoch {epoch} was fenced by epoch {txn.producer_epoch}",
            )
        if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
            raise TxnError(ErrorCode.concurrent_transactions, f"transaction {transactional_id} is ending")
        if not allow_empty and txn.state != ONGOING:
            raise TxnError(ErrorCode.invalid_txn_state, f"transaction {transactional_id} is {txn.state}")
        return txn

    def _begin(self, txn: TxnMetadata) -> None:
        if txn.state != ONGOING:
            txn.state = ONGOING
            txn.started_ms = _now_ms()
            txn.partitions.clear()
            txn.offsets.clear()
        txn.updated_ms = _now_ms()

    async def _save(self, txn: TxnMetadata, delete: bool = False) -> None:
        """Write ``txn``'s row as it is now (or delete it); in a cluster only while the database
        says this incarnation still leads the id's slot at the epoch it loaded it with."""
        self._unsaved.pop(txn.transactional_id, None)  # this write carries its state too
        tid = txn.transactional_id
        row = None if delete else row_of(txn)
        cluster = self._cluster
        if not self._broker.clustered:
            await self._writer.run(lambda conn: self.store.write_row(conn, tid, row, None))
            return
        slot = None if cluster is None else cluster.slot(tid)
        epoch = None if slot is None else self._slots.get(slot)
        if cluster is None or slot is None or epoch is None:
            raise TxnError(ErrorCode.not_coordinator, f"transaction slot of {tid} moved away")

        def fence(conn: Connection) -> bool:
            return cluster.holds_slot(conn, slot, epoch)

        try:
            await self._writer.run(lambda conn: self.store.write_row(conn, tid, row, fence))
        except TxnFenced as exc:
            log.warning("transaction slot %d moved away (epoch %d): %s", slot, epoch, exc)
            self.slots_lost({slot})
            raise TxnError(ErrorCode.not_coordinator, str(exc)) from exc

    async def _bump_epoch(self, txn: TxnMetadata) -> None:
        if txn.producer_epoch + 1 >= MAX_EPOCH:
            txn.producer_id = await self._broker.allocate_producer_id()
            txn.producer_epoch = 0
        else:
            txn.producer_epoch += 1

    async def _abort(self, txn: TxnMetadata, bump_epoch: bool) -> None:
        """Abort an Ongoing transaction (timeout, fencing, recovery); the epoch is bumped first so
        the markers carry it and the old producer is fenced everywhere."""
        for part in txn.partitions.values():
            self._open.pop((part.stream_id, txn.producer_id), None)
        if bump_epoch:
            await self._bump_epoch(txn)
        txn.state = PREPARE_ABORT
        txn.updated_ms = _now_ms()
        await self._save(txn)
        await self._complete(txn)

    async def _complete(self, txn: TxnMetadata) -> None:
        """Write the markers of a Prepare state, then record it Complete (repeatable); the caller
        holds the transactional id's lock."""
        await self._write_markers(txn)
        await self._record_complete(txn)

    async def _write_markers(self, txn: TxnMetadata) -> None:
        """The markers of a Prepare state (and, in a cluster, the commit of its group offsets). In a
        cluster a marker goes through the partition's leader, and markers that could not be written
        yet (a leader failing over) are retried until they are or this broker loses the slot."""
        commit = txn.state == PREPARE_COMMIT
        pending: list[TxnPartition | str] = [*txn.partitions.values()]
        if self._broker.clustered:
            if commit:
                pending += list(txn.offsets)  # each group's coordinator commits its offsets
            else:
                await asyncio.to_thread(self.store.drop_pending_offsets, txn.producer_id, list(txn.offsets))
        delay = 0.1
        while True:
            failed = await self._deliver(txn, pending, commit)
            if not failed or not self._broker.clustered:
                break
            if not self.owns(txn.transactional_id) or self._txns.get(txn.transactional_id) is not txn:
                raise TxnError(ErrorCode.not_coordinator, f"transaction {txn.transactional_id} moved away")
            pending = failed
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _record_complete(self, txn: TxnMetadata, durable: bool = True) -> None:
        """After the markers: commit the group offsets (single node) and the Complete state, on a
        single node not ``durable`` at once (:meth:`_save_later`): a Prepare row whose markers are
        in is finished again by a restart, which writes its markers twice (consumers skip a second
        marker of a transaction already ended; an abort's second aborted-index entry covers only
        the same records). Not in a cluster: there a partition's
        new leader reads an unfinished row as a transaction still open in the partition."""
        commit = txn.state == PREPARE_COMMIT
        # Group offsets are written at once too: finished again after a restart they could undo a
        # later plain OffsetCommit of the group.
        durable = durable or self._broker.clustered or any(txn.offsets.values())
        if commit and not self._broker.clustered:
            for group_id, offsets in txn.offsets.items():
                if not offsets:
                    continue
                if self._offset_committer is None:
                    self._unapplied.append((group_id, dict(offsets)))
                else:
                    await self._offset_committer(group_id, offsets)
        txn.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        txn.partitions.clear()
        txn.offsets.clear()
        txn.updated_ms = _now_ms()
        if durable:
            await self._save(txn)
        else:
            self._save_later(txn)

    async def _deliver(
        self, txn: TxnMetadata, pending: list[TxnPartition | str], commit: bool
    ) -> list[TxnPartition | str]:
        """Write every pending marker (and have every pending group's offsets committed) at once:
        the markers of partitions led here together (they share the next WAL write), one
        WriteTxnMarkers per other leader. Returns what must be tried again."""
        cluster, leadership = self._cluster, self._broker.leadership
        remote: list[TxnPartition] = []
        here: list[TxnPartition | str] = []
        for part in pending:
            if isinstance(part, TxnPartition):
                self._open.pop((part.stream_id, txn.producer_id), None)
                if cluster is not None and not leadership.leads(part.topic, part.partition):
                    remote.append(part)
                    continue
            here.append(part)
        jobs = [
            self._commit_group_offsets(txn, part)
            if isinstance(part, str)
            else self._write_local_marker(txn, part, commit)
            for part in here
        ]
        done = await asyncio.gather(*jobs)
        failed = [part for part, ok in zip(here, done, strict=True) if not ok]
        if remote and cluster is not None:
            epoch = self._slots.get(cluster.slot(txn.transactional_id), 0)
            codes = await cluster.send_markers(
                [(p.topic, p.partition) for p in remote], txn.producer_id, txn.producer_epoch, commit, epoch
            )
            for part in remote:
                code = codes.get((part.topic, part.partition), ErrorCode.unknown_server_error)
                if code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):  # deleted: no marker
                    log.info(
                        "transaction %s: marker for %s-%d not written yet: %s",
                        txn.transactional_id,
                        part.topic,
                        part.partition,
                        code.name,
                    )
                    failed.append(part)
        return failed

    async def _commit_group_offsets(self, txn: TxnMetadata, group_id: str) -> bool:
        """Cluster: have the group's coordinator commit the transaction's offsets of the group
        (here, or through WriteTxnMarkers naming the group's slot); False: try again."""
        broker, cluster = self._broker, self._cluster
        node = broker.leadership.group_coordinator(group_id)
        if node == broker.node_id or cluster is None:
            try:
                await self.apply_pending_offsets(txn.producer_id, lambda g: g == group_id, True)
            except GroupFenced as exc:  # the group's slot moved: its new coordinator is asked next
                log.info(
                    "transaction %s: offsets of group %s not committed here: %s",
                    txn.transactional_id,
                    group_id,
                    exc,
                )
                return False
            return True
        key = (GROUP_SLOTS_TOPIC, cluster.group_slot(group_id))
        epoch = self._slots.get(cluster.slot(txn.transactional_id), 0)
        codes = await cluster.send_markers([key], txn.producer_id, txn.producer_epoch, True, epoch)
        code = codes.get(key, ErrorCode.unknown_server_error)
        if code is not ErrorCode.none:
            log.info(
                "transaction %s: offsets of group %s not committed yet: %s",
                txn.transactional_id,
                group_id,
                code.name,
            )
        return code is ErrorCode.none

    async def _write_local_marker(self, txn: TxnMetadata, part: TxnPartition, commit: bool) -> bool:
        """One marker of a partition led here; False: try again."""
        try:
            await self.write_marker(part.stream_id, txn.producer_id, txn.producer_epoch, commit, part.start)
        except StreamError as exc:
            # A deleted topic needs no marker; anything else is retried by the next attempt (in a
            # cluster: the retry goes to the partition's new leader).
            log.warning(
                "transaction %s: no marker in %s-%d: %s",
                txn.transactional_id,
                part.topic,
                part.partition,
                exc,
            )
            return not self._broker.clustered
        return True

    async def write_marker(
        self,
        stream_id: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        start: int | None = None,
        coordinator_epoch: int = 0,
    ) -> int:
        """Partition side: append a transaction's COMMIT or ABORT marker to a stream this broker
        leads and close the transaction there (an abort enters the aborted index, from its first
        batch, else ``start``, else the marker). Returns the marker's offset. Raises StreamError."""
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
            await asyncio.to_thread(self.store.add_aborted, [entry])
            self.partitions.add_aborted(*entry)
        self.partitions.end(stream_id, producer_id)
        self._verified.pop((stream_id, producer_id), None)
        return offset

    def accept_marker(self, producer_id: int, coordinator_epoch: int) -> bool:
        """Partition side: refuse a marker from a coordinator older than one already seen for the
        producer (a deposed coordinator finishing late)."""
        if coordinator_epoch < self._marker_epochs.get(producer_id, -1):
            return False
        self._marker_epochs[producer_id] = coordinator_epoch
        return True

    async def _expire_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.abort_timed_out()
            except Exception:
                log.exception("aborting timed-out transactions failed")

    async def abort_timed_out(self, now_ms: int | None = None) -> int:
        """Abort (and fence) every Ongoing transaction older than its timeout; returns how many."""
        now = _now_ms() if now_ms is None else now_ms
        expired = [t for t in self._txns.values() if t.state == ONGOING and now - t.started_ms > t.timeout_ms]
        for txn in expired:
            async with self._lock(txn.transactional_id):
                if txn.state == ONGOING and now - txn.started_ms > txn.timeout_ms:
                    log.info(
                        "transaction %s timed out after %d ms: aborting", txn.transactional_id, txn.timeout_ms
                    )
                    await self._abort(txn, bump_epoch=True)
        await self._expire_ids(now)
        return len(expired)

    async def _expire_ids(self, now: int) -> None:
        """Forget transactional ids idle for ``transactional.id.expiration.ms`` with no open
        transaction (Kafka's rule), so the table does not grow with every id ever used."""
        idle_ms = int(self._broker.config.get(settings.ID_EXPIRATION.name))
        for txn in list(self._txns.values()):
            if txn.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) and now - txn.updated_ms > idle_ms:
                async with self._lock(txn.transactional_id):
                    if self._txns.get(txn.transactional_id) is txn and now - txn.updated_ms > idle_ms:
                        await self._save(txn, delete=True)
                        del self._txns[txn.transactional_id]
                        self._locks.pop(txn.transactional_id, None)
