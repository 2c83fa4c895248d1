"""Carrying out the state machine's actions: rows written (one writer thread, fenced in a
cluster), markers written and retried, Complete states left for the next write on a single node,
coordinator slots gained and lost. The request-facing part is
:class:`~tabletopic.broker.transactions.coordinator.TransactionCoordinator`."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.actions import (
    Action,
    Delete,
    NeedProducerId,
    Outcome,
    Persist,
    Respond,
    WriteMarkers,
)
from tabletopic.broker.transactions.machine import TransactionMachine
from tabletopic.broker.transactions.model import PREPARING, TxnMetadata, TxnPartition
from tabletopic.broker.transactions.participants import GroupOffsets, TxnError
from tabletopic.broker.transactions.ports import MarkerWriter
from tabletopic.broker.transactions.row_writer import RowWriter
from tabletopic.broker.transactions.slots import CoordinatorSlots
from tabletopic.broker.transactions.store import TxnFenced, TxnStore, row_of
from tabletopic.crashpoints import crash_point
from tabletopic.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# How long a call on a transactional id whose markers are being written waits for them before it is
# answered CONCURRENT_TRANSACTIONS: long enough for a WAL write (the usual case, answered without a
# client retry and its back-off), short enough that a marker held up by a leader failing over does
# not hold the client's request.
COMPLETION_WAIT_S = 0.5
# How long a single node leaves a Complete state unwritten when its markers are in: the producer's
# next AddPartitionsToTxn usually comes first and its Ongoing row replaces it (one database commit
# per transaction fewer). Losing it to a crash only makes the restart write the markers once more.
COMPLETE_SAVE_DELAY_S = 1.0

AnOutcome = TypeVar("AnOutcome", bound=Outcome | None)

# The refusals librdkafka and the Java producer cannot go on from (fatal, or fencing): only the
# id's current coordinator may send them (see Driver.confirmed).
FATAL_REFUSALS = frozenset(
    {
        ErrorCode.invalid_txn_state,
        ErrorCode.producer_fenced,
        ErrorCode.invalid_producer_epoch,
        ErrorCode.invalid_producer_id_mapping,
    }
)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Driver:
    def __init__(
        self,
        machine: TransactionMachine,
        store: TxnStore,
        markers: MarkerWriter,
        allocate_producer_id: Callable[[], Awaitable[int]],
        group_offsets: GroupOffsets,
    ) -> None:
        self.machine = machine
        self.clustered = machine.clustered
        self.store = store
        self.slots = CoordinatorSlots(machine.clustered)
        self._markers = markers
        self._allocate = allocate_producer_id
        self._group_offsets = group_offsets
        self._writer = RowWriter(store.engine, "transaction-rows")
        self._locks: dict[str, asyncio.Lock] = {}
        self._ready = False
        self._background: set[asyncio.Task[None]] = set()
        # Transactional id -> the task writing the markers of its Prepare state (EndTxn answered).
        self._completing: dict[str, asyncio.Task[None]] = {}
        # Single node: Complete rows left for the next write of the row (or a delayed save).
        self._unsaved: dict[str, Persist] = {}

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        return self._locks.setdefault(transactional_id, asyncio.Lock())

    # --- performing actions ---------------------------------------------------------------------
    async def perform(self, actions: Iterable[Action]) -> Outcome | None:
        """Carry out ``actions`` in order; the caller holds the transactional id's lock. Returns
        the event's outcome: the answer, or a request to hand the event in again."""
        for action in actions:
            if isinstance(action, Persist):
                if action.at_once:
                    await self._save(action)
                else:
                    self._save_later(action)
            elif isinstance(action, WriteMarkers):
                if action.in_background:
                    crash_point("transaction.prepared")  # EndTxn's Prepare state is durable
                    self._complete_later(action)
                else:
                    await self._write_markers(action)
                    await self.perform(self.machine.markers_written(action, _now_ms()))
            elif isinstance(action, Delete):
                await self._save_row(action.transactional_id, None)
                self.machine.forget(action.transactional_id)
                self._locks.pop(action.transactional_id, None)
            else:
                return action
        return None

    async def perform_event(self, tid: str, event: Callable[[], list[Action]]) -> Outcome | None:
        """Hand ``tid`` an event and carry out the actions it returns; the caller holds the id's lock.

        The state machine changes the id's record as it takes the event, before its row is written.
        Should the actions fail short of a fence (the database did not answer), the record goes
        back to what it was: left ahead of the row, it would answer the client's retry from a state
        nothing durable holds (a retried AddOffsetsToTxn acknowledged while the row, which the
        group's coordinator checks TxnOffsetCommit against, lacks the group). If the write did reach
        the database and only its answer was lost, the row is a step ahead instead, which is safe:
        only this coordinator acts on it, and the client, answered with an error, asks again."""
        txn = self.machine.get(tid)
        before = None if txn is None else txn.snapshot()
        try:
            return await self.confirmed(tid, await self.perform(event()))
        except TxnError:
            raise  # a refusal, or a fence: the slot and its records are gone already
        except Exception:
            if self.slots.owns(tid):
                self.machine.put_back(tid, txn, before)
            raise

    async def confirmed(self, tid: str, outcome: AnOutcome) -> AnOutcome:
        """``outcome``, once confirmed in the database, if it is a refusal the producer cannot
        recover from, that this broker still coordinates ``tid``. Such a refusal is read from
        memory, with no write to fence it, and a broker that has not yet learnt it lost the id's
        slot would answer from the state it had: an EndTxn refused INVALID_TXN_STATE by the old
        coordinator while the transaction is Ongoing with the new one. Raises
        TxnError(NOT_COORDINATOR) instead, which the client retries at the id's coordinator."""
        if not (isinstance(outcome, Respond) and outcome.code in FATAL_REFUSALS and self.clustered):
            return outcome
        slot, holds = self.slots.fence(tid)
        if not await self._writer.run(holds):
            log.info(
                "transaction slot %d moved away; refusing %s's request as not coordinated here", slot, tid
            )
            self.slots_lost({slot})
            raise TxnError(ErrorCode.not_coordinator, f"transaction slot {slot} of {tid} moved away")
        return outcome

    async def _run(self, event: Callable[[int | None], list[Action]], tid: str, why: str) -> None:
        """An event of the coordinator's own (recovery, a timeout): handed a new producer id if it
        asks for one (the epoch is exhausted)."""
        txn = self.machine.get(tid)
        state = None if txn is None else txn.state

        def first() -> list[Action]:
            actions = event(None)
            if actions:
                log.info("transaction %s %s in state %s: ending it", tid, why, state)
            return actions

        if isinstance(await self.perform_event(tid, first), NeedProducerId):
            producer_id = await self._allocate()
            await self.perform_event(tid, lambda: event(producer_id))

    async def _save(self, persist: Persist) -> None:
        await self._save_row(persist.txn.transactional_id, persist)

    async def _save_row(self, tid: str, persist: Persist | None) -> None:
        """Write the row (None: delete it); in a cluster only while the database says this
        incarnation still leads the id's slot at the epoch it loaded it with."""
        self._unsaved.pop(tid, None)  # this write carries its state too
        row = None if persist is None else row_of(persist.txn)
        if not self.clustered:
            await self._writer.run(lambda conn: self.store.write_row(conn, tid, row, None))
            return
        slot, fence = self.slots.fence(tid)
        try:
            await self._writer.run(lambda conn: self.store.write_row(conn, tid, row, fence))
        except TxnFenced as exc:
            log.warning("transaction slot %d moved away: %s", slot, exc)
            self.slots_lost({slot})
            raise TxnError(ErrorCode.not_coordinator, str(exc)) from exc

    def _save_later(self, persist: Persist) -> None:
        """Single node: write a Complete row unless another write of the row comes first."""
        tid = persist.txn.transactional_id
        self._unsaved[tid] = persist

        async def save() -> None:
            await asyncio.sleep(COMPLETE_SAVE_DELAY_S)
            try:
                async with self._lock(tid):
                    if self._unsaved.get(tid) is persist:
                        await self._save(persist)
            except Exception:
                log.exception("recording transaction %s complete failed", tid)

        self._spawn(save(), f"transaction-complete-{tid}")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # --- markers --------------------------------------------------------------------------------
    def _complete_later(self, marked: WriteMarkers) -> None:
        """Finish a Prepare state in the background (after EndTxn was answered, or for a slot
        taken over); calls on its transactional id meanwhile wait for it (:meth:`settled`)."""
        tid = marked.transactional_id
        task = self._spawn(self._finish(marked), f"transaction-finish-{tid}")
        self._completing[tid] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._completing.get(tid) is finished:
                del self._completing[tid]

        task.add_done_callback(done)

    async def _finish(self, marked: WriteMarkers) -> None:
        """The markers first, without the transactional id's lock (they are what a waiting call
        waits for, and calls that do not wait see the Prepare state and are refused), then the
        Complete state under the lock, so no other change of the row is written meanwhile."""
        tid = marked.transactional_id
        txn = self.machine.get(tid)
        delay = 0.1
        while self._still_preparing(tid, txn):
            try:
                await self._write_markers(marked)
                async with self._lock(tid):
                    if self._still_preparing(tid, txn):
                        await self.perform_event(
                            tid, lambda: self.machine.markers_written(marked, _now_ms(), at_once=False)
                        )
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

    def _still_preparing(self, tid: str, txn: TxnMetadata | None) -> bool:
        return txn is not None and self.machine.get(tid) is txn and txn.state in PREPARING

    async def _write_markers(self, marked: WriteMarkers) -> None:
        """The markers (in a cluster: retried through the partitions' leaders until written or
        this broker loses the slot), then on a single node the committed group offsets."""
        tid = marked.transactional_id
        txn = self.machine.get(tid)
        pending: list[TxnPartition | str] = [*marked.partitions]
        if self.clustered:
            if marked.commit:
                pending += marked.groups  # each group's coordinator commits its offsets
            else:
                await asyncio.to_thread(
                    self.store.drop_pending_offsets, marked.producer_id, list(marked.groups)
                )
        delay = 0.1
        while True:
            failed = await self._markers.write(marked, pending, self.slots.marker_epoch(tid))
            if not failed or not self.clustered:
                break
            pending = failed
            self._still_coordinating(tid, txn)
            await asyncio.sleep(delay)
            self._still_coordinating(tid, txn)  # a broker deposed meanwhile sends no more markers
            delay = min(delay * 2, 1.0)
        for group_id, offsets in marked.offsets.items():
            await self._group_offsets.commit(group_id, offsets)

    def _still_coordinating(self, tid: str, txn: TxnMetadata | None) -> None:
        if not self.slots.owns(tid) or self.machine.get(tid) is not txn:
            raise TxnError(ErrorCode.not_coordinator, f"transaction {tid} moved away")

    async def settled(self, transactional_id: str, wait_s: float | None = COMPLETION_WAIT_S) -> None:
        """Wait (at most ``wait_s`` seconds; None: for as long as it takes) until the markers of an
        ended transaction of ``transactional_id`` are written. Returns either way: a call still
        finding the Prepare state answers CONCURRENT_TRANSACTIONS."""
        task = self._completing.get(transactional_id)
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=wait_s)

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
            if not task.done() and (txn := self.machine.get(tid)) is not None and wanted & txn.offsets.keys()
        ]
        if busy:
            await asyncio.wait(busy, timeout=COMPLETION_WAIT_S)
        if not self.clustered or not require_stable:
            return
        while await asyncio.to_thread(self.store.has_pending_offsets, list(wanted)):
            if asyncio.get_running_loop().time() >= deadline:
                return
            await asyncio.sleep(0.02)

    # --- recovery and slots ---------------------------------------------------------------------
    async def recover(self, txns: list[TxnMetadata]) -> None:
        """A single node's start: finish every Prepare state, abort every Ongoing transaction."""
        self.machine.load(txns)
        for txn in txns:
            tid = txn.transactional_id
            await self._run(
                functools.partial(self.machine.recovered, tid, _now_ms()), tid, "left by a restart"
            )

    async def slots_gained(self, slots: dict[int, int]) -> None:
        """Take over coordinator slots (``{slot: leader epoch}``): load their transactions, finish
        those a previous coordinator left in a Prepare state, keep Ongoing ones (they go on with
        this coordinator or time out)."""
        cluster = self.slots.cluster
        assert cluster is not None
        self.slots.loading.update(slots)
        self.slots.held.update(slots)
        try:
            txns = await asyncio.to_thread(
                self.store.load_transactions, lambda tid: cluster.slot(tid) in slots
            )
        except Exception:
            for slot in slots:
                self.slots.held.pop(slot, None)
            raise
        finally:
            self.slots.loading.difference_update(slots)
        kept = [txn for txn in txns if cluster.slot(txn.transactional_id) in self.slots.held]
        self.machine.load(kept)
        log.info("coordinating transaction slots %s: %d transactional ids", sorted(slots), len(txns))
        for txn in kept:
            for action in self.machine.taken_over(txn.transactional_id):
                if isinstance(action, WriteMarkers):
                    log.info("finishing %s of transaction %s taken over", txn.state, txn.transactional_id)
                    self._complete_later(action)

    def slots_lost(self, slots: set[int]) -> None:
        """Another broker coordinates these slots now: forget their transactions."""
        cluster = self.slots.cluster
        if cluster is None:
            return
        for slot in slots:
            self.slots.held.pop(slot, None)
        for tid in [t for t in self.machine.txns if cluster.slot(t) in slots]:
            self.machine.forget(tid)
            self._locks.pop(tid, None)

    async def drain(self) -> None:
        """At stop: let answered transactions finish their markers (what is cut short is finished by
        the next start), write the Complete rows left unwritten, close the writer."""
        if self._completing:
            await asyncio.wait(list(self._completing.values()), timeout=COMPLETION_WAIT_S * 4)
        for persist in list(self._unsaved.values()):
            tid = persist.txn.transactional_id
            async with self._lock(tid):
                if self._unsaved.get(tid) is persist:
                    await self._save(persist)
        await cancel_and_wait(list(self._background))
        await self._writer.close()
