"""The transaction coordinator's state machine, sans-IO.

A :class:`TransactionMachine` holds the state of every transactional id this broker coordinates and
takes events: the producer's requests (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn), a transaction's markers written, a timeout, a restart, a coordinator slot
taken over, an idle id expiring. It changes the state (checked against Kafka's table in
:mod:`.transitions`) and returns the :mod:`actions <.actions>` its driver must carry out, in order:
persist the row, write the markers to these partitions, allocate a producer id, answer the client
with this error code. It never awaits, never reads a clock (``now_ms`` is an argument) and never
touches the database or a partition, so every recovery case is a plain unit test. The driver
(:mod:`.coordinator`) decides only *when*: locks, background tasks, retries.

The rules are Kafka's: a newer InitProducerId bumps the epoch and aborts the open transaction (the
old producer is fenced); a call while the markers of an ended transaction are being written gets
CONCURRENT_TRANSACTIONS; EndTxn retried after its transaction completed is answered as it was;
an Ongoing transaction older than its timeout is aborted with a bumped epoch; after a restart a
Prepare state is finished (its markers written again) and an Ongoing transaction aborted.
Unlike Kafka, an epoch bump keeps a Complete state (DescribeTransactions shows the last outcome).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.actions import (
    Action,
    Again,
    Delete,
    NeedProducerId,
    Persist,
    Respond,
    WriteMarkers,
    refuse,
)
from tabletopic.broker.transactions.model import (
    COMPLETED,
    MAX_EPOCH,
    PREPARING,
    TxnMetadata,
    TxnOffsets,
    TxnPartition,
    TxnState,
)
from tabletopic.broker.transactions.transitions import check_transition

TopicPartition = tuple[str, int]


def timeout_refusal(timeout_ms: int, max_timeout_ms: int) -> Respond | None:
    """InitProducerId's check of the transaction timeout, before anything else."""
    if 0 < timeout_ms <= max_timeout_ms:
        return None
    return Respond(
        ErrorCode.invalid_transaction_timeout,
        reason=f"transaction timeout {timeout_ms} ms is outside (0, {max_timeout_ms}] "
        "(transaction.max.timeout.ms)",
    )


class TransactionMachine:
    """Every transactional id of this coordinator. Events return the actions to perform, in order.

    Args:
        clustered: one broker of a cluster: Complete states are persisted at once (a partition's new
            leader reads an unfinished row as a transaction still open), and group offsets are
            committed by the groups' coordinators through the markers.
    """

    def __init__(self, clustered: bool = False) -> None:
        self.clustered = clustered
        self.txns: dict[str, TxnMetadata] = {}

    # --- state kept and dropped -------------------------------------------------------------------
    def load(self, txns: Iterable[TxnMetadata]) -> None:
        """Adopt transactional ids as the database holds them (a restart, a slot gained)."""
        for txn in txns:
            self.txns[txn.transactional_id] = txn

    def forget(self, transactional_id: str) -> None:
        self.txns.pop(transactional_id, None)

    def put_back(self, transactional_id: str, txn: TxnMetadata | None, before: TxnMetadata | None) -> None:
        """Undo an event whose actions could not be carried out: the id's record ``txn`` (the same
        object, which a task finishing its markers recognises it by) takes back ``before``, its
        :meth:`~TxnMetadata.snapshot` from before the event; an id the event created is dropped."""
        if txn is None or before is None:
            self.txns.pop(transactional_id, None)
            return
        txn.take_back(before)
        self.txns[transactional_id] = txn

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self.txns.get(transactional_id)

    # --- queries ------------------------------------------------------------------------------------
    def check(
        self, transactional_id: str, producer_id: int, epoch: int, ongoing: bool = False
    ) -> Respond | None:
        """The refusal a request of this producer gets before it changes anything, or None."""
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return Respond(
                ErrorCode.invalid_producer_id_mapping,
                reason=f"producer {producer_id} does not belong to transactional id {transactional_id}",
            )
        if epoch != txn.producer_epoch:
            return Respond(
                ErrorCode.producer_fenced,
                reason=f"producer {producer_id} epoch {epoch} was fenced by epoch {txn.producer_epoch}",
            )
        if txn.state in PREPARING:
            return Respond(
                ErrorCode.concurrent_transactions, reason=f"transaction {transactional_id} is ending"
            )
        if ongoing and txn.state is not TxnState.ONGOING:
            return Respond(
                ErrorCode.invalid_txn_state, reason=f"transaction {transactional_id} is {txn.state}"
            )
        return None

    def check_produce(self, transactional_id: str, producer_id: int, epoch: int, stream_id: int) -> ErrorCode:
        """May this producer write a transactional batch to this stream now (it added the
        partition to its open transaction)?"""
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch < txn.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if txn.state is not TxnState.ONGOING or not any(
            part.stream_id == stream_id for part in txn.partitions.values()
        ):
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    def to_join(self, transactional_id: str, wanted: Iterable[TopicPartition]) -> list[TopicPartition]:
        """The partitions of ``wanted`` not yet in the open transaction (their start is needed)."""
        txn = self.txns.get(transactional_id)
        return [key for key in wanted if txn is None or key not in txn.partitions]

    def timed_out(self, now_ms: int) -> list[str]:
        """The transactional ids whose Ongoing transaction is older than its timeout."""
        return [tid for tid, txn in self.txns.items() if self._expired(txn, now_ms)]

    def idle(self, now_ms: int, idle_ms: int) -> list[str]:
        """The transactional ids with no open transaction unused for ``idle_ms``."""
        return [tid for tid, txn in self.txns.items() if self._idle(txn, now_ms, idle_ms)]

    # --- the producer's requests -------------------------------------------------------------------
    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        max_timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        now_ms: int,
        new_producer_id: int | None = None,
    ) -> list[Action]:
        """InitProducerId: a new id starts Empty at epoch 0; a known one gets its epoch bumped,
        which fences the older producer (an open transaction is aborted first, with one more bump).
        ``producer_id`` >= 0 (KIP-360) must be the current producer and epoch."""
        refusal = timeout_refusal(timeout_ms, max_timeout_ms)
        if refusal is not None:
            return [refusal]
        txn = self.txns.get(transactional_id)
        if txn is None:
            if new_producer_id is None:
                return [NeedProducerId()]
            txn = TxnMetadata(
                transactional_id, new_producer_id, 0, TxnState.EMPTY, timeout_ms, updated_ms=now_ms
            )
            self.txns[transactional_id] = txn
            return [Persist(txn.snapshot()), Respond(producer_id=txn.producer_id, producer_epoch=0)]
        if producer_id >= 0 and (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
            return refuse(
                ErrorCode.producer_fenced, f"producer {producer_id} epoch {producer_epoch} is not current"
            )
        if txn.state in PREPARING:
            return refuse(
                ErrorCode.concurrent_transactions, f"transaction {transactional_id} is still ending"
            )
        if self._needs_producer_id(txn) and new_producer_id is None:
            return [NeedProducerId()]
        if txn.state is TxnState.ONGOING:
            # The abort's markers carry the bumped epoch, so the old producer is fenced everywhere.
            return [*self._abort(txn, now_ms, new_producer_id), Again()]
        if txn.state is TxnState.EMPTY:
            check_transition(txn.state, TxnState.EMPTY)
        self._bump(txn, new_producer_id)
        txn.timeout_ms = timeout_ms
        return [
            Persist(txn.snapshot()),
            Respond(producer_id=txn.producer_id, producer_epoch=txn.producer_epoch),
        ]

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        wanted: Sequence[TopicPartition],
        joining: Mapping[TopicPartition, TxnPartition | None],
        now_ms: int,
    ) -> list[Action]:
        """AddPartitionsToTxn. ``joining``: each partition :meth:`to_join` named, or any partition
        that does not exist, with where it joins (None: no such partition). All or nothing, as
        Kafka: one unknown partition and the others are answered OPERATION_NOT_ATTEMPTED."""
        refusal = self.check(transactional_id, producer_id, epoch)
        if refusal is not None:
            return [refusal]
        txn = self.txns[transactional_id]
        results: dict[TopicPartition, ErrorCode] = {}
        added: list[TxnPartition] = []
        for key in wanted:
            part = joining.get(key, txn.partitions.get(key))
            results[key] = ErrorCode.none if part is not None else ErrorCode.unknown_topic_or_partition
            if part is not None and key in joining:
                added.append(part)
        if any(code is not ErrorCode.none for code in results.values()):
            return [
                Respond(
                    partitions=tuple(
                        (key, code if code is not ErrorCode.none else ErrorCode.operation_not_attempted)
                        for key, code in results.items()
                    )
                )
            ]
        actions: list[Action] = []
        if added:
            self._begin(txn, now_ms)
            for part in added:
                txn.partitions[(part.topic, part.partition)] = part
            actions.append(Persist(txn.snapshot()))
        actions.append(Respond(partitions=tuple(results.items())))
        return actions

    def add_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str, now_ms: int
    ) -> list[Action]:
        """AddOffsetsToTxn: the group's offsets will be committed with the transaction."""
        refusal = self.check(transactional_id, producer_id, epoch)
        if refusal is not None:
            return [refusal]
        txn = self.txns[transactional_id]
        if group_id in txn.offsets:
            return [Respond()]
        self._begin(txn, now_ms)
        txn.offsets[group_id] = {}
        return [Persist(txn.snapshot()), Respond()]

    def txn_offset_commit(self, commit: TxnOffsets) -> list[Action]:
        """TxnOffsetCommit on a single node: offsets held until the transaction commits."""
        refusal = self.check(commit.transactional_id, commit.producer_id, commit.epoch)
        if refusal is not None:
            return [refusal]
        txn = self.txns[commit.transactional_id]
        if commit.group_id not in txn.offsets:
            return refuse(
                ErrorCode.invalid_txn_state, f"group {commit.group_id} was not added to the transaction"
            )
        pending = txn.offsets[commit.group_id]
        for offset in commit.offsets:
            pending[(offset.topic, offset.partition)] = offset
        return [Persist(txn.snapshot()), Respond()]

    def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int
    ) -> list[Action]:
        """EndTxn: the Prepare state is persisted and answered; the markers follow in the
        background. A retry of an EndTxn whose transaction completed is answered as it was."""
        txn = self.txns.get(transactional_id)
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn is not None and (txn.producer_id, txn.producer_epoch, txn.state) == (producer_id, epoch, done):
            return [Respond()]
        refusal = self.check(transactional_id, producer_id, epoch, ongoing=True)
        if refusal is not None:
            return [refusal]
        txn = self.txns[transactional_id]
        self._move(txn, TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
        txn.updated_ms = now_ms
        return [Persist(txn.snapshot()), self._markers(txn, in_background=True), Respond()]

    # --- the coordinator's own events ------------------------------------------------------------
    def markers_written(self, marked: WriteMarkers, now_ms: int, at_once: bool = True) -> list[Action]:
        """The markers of ``marked`` (and its group offsets) are in: the transaction is Complete.
        Nothing if the transaction is no longer the one marked (ended or taken over meanwhile)."""
        txn = self.txns.get(marked.transactional_id)
        prepared = TxnState.PREPARE_COMMIT if marked.commit else TxnState.PREPARE_ABORT
        if txn is None or (txn.producer_id, txn.producer_epoch, txn.state) != (
            marked.producer_id,
            marked.producer_epoch,
            prepared,
        ):
            return []
        # Group offsets are persisted at once too: finished again after a restart they could undo a
        # later plain OffsetCommit of the group.
        at_once = at_once or self.clustered or any(txn.offsets.values())
        self._move(txn, TxnState.COMPLETE_COMMIT if marked.commit else TxnState.COMPLETE_ABORT)
        txn.partitions.clear()
        txn.offsets.clear()
        txn.updated_ms = now_ms
        return [Persist(txn.snapshot(), at_once=at_once)]

    def time_out(
        self, transactional_id: str, now_ms: int, new_producer_id: int | None = None
    ) -> list[Action]:
        """An Ongoing transaction older than its timeout is aborted and its producer fenced."""
        txn = self.txns.get(transactional_id)
        if txn is None or not self._expired(txn, now_ms):
            return []
        if self._needs_producer_id(txn) and new_producer_id is None:
            return [NeedProducerId()]
        return self._abort(txn, now_ms, new_producer_id)

    def recovered(
        self, transactional_id: str, now_ms: int, new_producer_id: int | None = None
    ) -> list[Action]:
        """A single node's restart, before it serves: finish a Prepare state (its markers written
        again), abort an Ongoing transaction (fencing its producer); nothing stays half visible."""
        txn = self.txns.get(transactional_id)
        if txn is None:
            return []
        if txn.state in PREPARING:
            return [self._markers(txn, in_background=False)]
        if txn.state is not TxnState.ONGOING:
            return []
        if self._needs_producer_id(txn) and new_producer_id is None:
            return [NeedProducerId()]
        return self._abort(txn, now_ms, new_producer_id)

    def taken_over(self, transactional_id: str) -> list[Action]:
        """A cluster broker gained the id's coordinator slot: a Prepare state is finished in the
        background; an Ongoing transaction goes on here (or times out as usual)."""
        txn = self.txns.get(transactional_id)
        if txn is None or txn.state not in PREPARING:
            return []
        return [self._markers(txn, in_background=True)]

    def expire(self, transactional_id: str, now_ms: int, idle_ms: int) -> list[Action]:
        """An id with no open transaction unused for ``transactional.id.expiration.ms`` is deleted
        (Kafka's rule), so the table does not grow with every id ever used."""
        txn = self.txns.get(transactional_id)
        if txn is None or not self._idle(txn, now_ms, idle_ms):
            return []
        check_transition(txn.state, TxnState.DEAD)
        return [Delete(transactional_id)]

    # --- internals --------------------------------------------------------------------------------
    @staticmethod
    def _expired(txn: TxnMetadata, now_ms: int) -> bool:
        return txn.state is TxnState.ONGOING and now_ms - txn.started_ms > txn.timeout_ms

    @staticmethod
    def _idle(txn: TxnMetadata, now_ms: int, idle_ms: int) -> bool:
        idle_state = txn.state is TxnState.EMPTY or txn.state in COMPLETED
        return idle_state and now_ms - txn.updated_ms > idle_ms

    @staticmethod
    def _needs_producer_id(txn: TxnMetadata) -> bool:
        return txn.producer_epoch + 1 >= MAX_EPOCH

    @staticmethod
    def _move(txn: TxnMetadata, target: TxnState) -> None:
        check_transition(txn.state, target)
        txn.state = target

    def _bump(self, txn: TxnMetadata, new_producer_id: int | None) -> None:
        if self._needs_producer_id(txn):
            assert new_producer_id is not None, "NeedProducerId is asked for first"
            txn.producer_id, txn.producer_epoch = new_producer_id, 0
        else:
            txn.producer_epoch += 1

    def _begin(self, txn: TxnMetadata, now_ms: int) -> None:
        if txn.state is not TxnState.ONGOING:
            self._move(txn, TxnState.ONGOING)
            txn.started_ms = now_ms
            txn.partitions.clear()
            txn.offsets.clear()
        txn.updated_ms = now_ms

    def _abort(self, txn: TxnMetadata, now_ms: int, new_producer_id: int | None) -> list[Action]:
        """Abort an Ongoing transaction (timeout, fencing, recovery); the epoch is bumped first so
        the markers carry it and the old producer is fenced everywhere."""
        self._bump(txn, new_producer_id)
        self._move(txn, TxnState.PREPARE_ABORT)
        txn.updated_ms = now_ms
        return [Persist(txn.snapshot()), self._markers(txn, in_background=False)]

    def _markers(self, txn: TxnMetadata, in_background: bool) -> WriteMarkers:
        commit = txn.state is TxnState.PREPARE_COMMIT
        offsets = {}
        if commit and not self.clustered:
            offsets = {group: dict(pending) for group, pending in txn.offsets.items() if pending}
        return WriteMarkers(
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            commit,
            tuple(txn.partitions.values()),
            tuple(txn.offsets),
            in_background,
            offsets,
        )
