"""The transaction coordinator: the asyncio driver around the sans-IO
:class:`~tabletopic.broker.transactions.machine.TransactionMachine`.

Everything that decides *what* happens (states, fencing, error codes, when markers are due) is the
machine's; this module and :mod:`.driver` decide *when*: one lock per transactional id, so each
id's events and their writes run one at a time; the row written (through the store, fenced in a
cluster) before anything acts on it; markers written through a
:class:`~tabletopic.broker.transactions.ports.MarkerWriter`, retried until written.

Ending a transaction: the PrepareCommit / PrepareAbort state is committed first and EndTxn is
answered then, as Kafka answers once the prepare record is in the transaction log; in the
background the markers are written (aborted ranges recorded in the aborted index, group offsets
committed) and the Complete state recorded. Until then the transactional id is busy: a call on it
first waits a moment for the markers (they usually take a WAL write or two), and is answered
CONCURRENT_TRANSACTIONS (which clients retry) if they are not done by then. At start every Prepare
state is finished and every Ongoing transaction aborted before the broker serves, so no
transaction is ever half visible.

In cluster mode (:class:`~tabletopic.broker.transactions.cluster.TxnCluster` attached) a broker
coordinates only the transactional ids of the coordinator slots it leads (:mod:`.slots`), and
writes every state change only while the database says it still leads the slot at the epoch it
loaded it with.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker.transactions import settings
from tabletopic.broker.transactions.actions import Action, Again, NeedProducerId, Respond
from tabletopic.broker.transactions.driver import Driver
from tabletopic.broker.transactions.machine import TransactionMachine, timeout_refusal
from tabletopic.broker.transactions.markers import LeaderMarkers
from tabletopic.broker.transactions.model import TxnMetadata, TxnOffsets, TxnPartition
from tabletopic.broker.transactions.participants import MemberCheck, OffsetCommitter, Participants, TxnError
from tabletopic.broker.transactions.ports import TxnBroker
from tabletopic.broker.transactions.store import TxnStore
from tabletopic.tasks import cancel_and_wait, to_the_end

if TYPE_CHECKING:
    from tabletopic.broker.transactions.cluster import TxnCluster

log = logging.getLogger(__name__)

__all__ = ["OffsetCommitter", "TransactionCoordinator", "TxnError", "coordinator_key"]


def coordinator_key(transactional_id: str) -> str:
    """The key FindCoordinator maps to a broker; cluster mode spreads these over brokers."""
    return transactional_id


def _now_ms() -> int:
    return int(time.time() * 1000)


def _answer(respond: Respond | None) -> Respond:
    """The request's answer; a refusal raised as TxnError, as the handlers expect."""
    assert respond is not None, "a request's event ends with its answer"
    if respond.code is not ErrorCode.none:
        raise TxnError(respond.code, respond.reason)
    return respond


class TransactionCoordinator(Driver):
    """The transaction APIs of this broker, and the partition side (:attr:`partitions`) Fetch,
    Produce and WriteTxnMarkers use."""

    def __init__(self, broker: TxnBroker, engine: Engine) -> None:
        store = TxnStore(engine)
        participants = Participants(broker, store)
        self._leader_markers = LeaderMarkers(broker, participants)
        super().__init__(
            TransactionMachine(broker.clustered),
            store,
            self._leader_markers,
            broker.allocate_producer_id,
            participants.group_offsets,
        )
        self._broker = broker
        self.participants = participants
        self.partitions = participants.partitions
        self._task: asyncio.Task[None] | None = None

    # --- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        await asyncio.to_thread(self.store.migrate)
        interval = self._broker.config.get(settings.ABORT_CHECK_INTERVAL.name) / 1000
        if not self.clustered:
            # In a cluster nothing is recovered here: each slot's state is loaded by the broker
            # that gains it, and each partition's open and aborted transactions by its leader.
            txns, aborted = await asyncio.to_thread(self.store.load)
            for stream_id, pid, first, last in aborted:
                self.partitions.add_aborted(stream_id, pid, first, last)
            await self.recover(txns)
        self._ready = True
        self._task = asyncio.create_task(self._expire_loop(interval), name="transaction-timeouts")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        await self.drain()

    async def set_offset_committer(self, committer: OffsetCommitter, check: MemberCheck) -> None:
        """Wire the group coordinator (started after this one); commits the offsets of
        transactions that recovery completed before it existed."""
        await self.participants.group_offsets.wire(committer, check)

    def attach_cluster(self, cluster: TxnCluster) -> None:
        """Coordinate only the slots ``cluster`` says this broker leads (from now on)."""
        self._leader_markers.attach_cluster(cluster)
        self.slots.attach(cluster)

    def owns(self, transactional_id: str) -> bool:
        """Whether this broker coordinates ``transactional_id`` (always, on a single node)."""
        return self.slots.owns(transactional_id)

    # --- the APIs -------------------------------------------------------------------------------
    # Each runs to its end even if its caller is cancelled: the state machine changes a
    # transactional id's record before its row is written, so a request cut off between the two
    # left the record ahead of the row, and the retry on a new connection was answered from memory
    # (an AddOffsetsToTxn, then TxnOffsetCommit refused INVALID_TXN_STATE by the group's coordinator
    # reading the row: fatal to the producer, in a fault run's PostgreSQL restart, when the server
    # still cancelled a closed connection's requests; it now lets them finish, and this stays for
    # any other cancellation). As Produce's appends, the request completes; only its answer is lost.
    @to_the_end
    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        """InitProducerId with a transactional id: ``(producer id, epoch)``. Raises TxnError."""
        max_timeout = int(self._broker.config.get(settings.MAX_TIMEOUT.name))
        refusal = timeout_refusal(timeout_ms, max_timeout)
        if refusal is not None:
            _answer(refusal)
        self.slots.check_owner(transactional_id)
        await self.settled(transactional_id)
        async with self._lock(transactional_id):
            self.slots.check_owner(transactional_id)
            pid, epoch = producer_id, producer_epoch
            new_pid: int | None = None
            while True:
                event = functools.partial(
                    self.machine.init_producer_id,
                    transactional_id, timeout_ms, max_timeout, pid, epoch, _now_ms(), new_pid,
                )  # fmt: skip
                outcome = await self.perform_event(transactional_id, event)
                if isinstance(outcome, NeedProducerId):
                    new_pid = await self._allocate()
                elif isinstance(outcome, Again):
                    pid, epoch, new_pid = outcome.producer_id, outcome.producer_epoch, None
                else:
                    answer = _answer(outcome)
                    return answer.producer_id, answer.producer_epoch

    @to_the_end
    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        wanted = list(partitions)
        await self.settled(transactional_id)
        async with self._lock(transactional_id):
            self._serving(transactional_id)
            refusal = self.machine.check(transactional_id, producer_id, epoch)
            if refusal is not None:
                _answer(await self.confirmed(transactional_id, refusal))
            joining = self.machine.to_join(transactional_id, wanted)
            joining += [key for key in wanted if key not in joining and not self._exists(*key)]
            starts = await self.participants.joining(joining)
            found: dict[tuple[str, int], TxnPartition | None] = dict(zip(joining, starts, strict=True))
            event = functools.partial(
                self.machine.add_partitions, transactional_id, producer_id, epoch, wanted, found, _now_ms()
            )
            return dict(_answer(await self._respond(transactional_id, event)).partitions)

    @to_the_end
    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> None:
        """AddOffsetsToTxn: the group's offsets will be committed with the transaction."""
        await self._request(
            transactional_id,
            lambda: self.machine.add_offsets(transactional_id, producer_id, epoch, group_id, _now_ms()),
        )

    @to_the_end
    async def txn_offset_commit(self, commit: TxnOffsets) -> None:
        """TxnOffsetCommit: offsets held until the transaction commits (dropped if it aborts).
        In a cluster it is sent to the group's coordinator, which keeps them in the database
        until the transaction's coordinator tells it the outcome (WriteTxnMarkers for the group's
        slot, as Kafka's coordinator writes a marker to the group's __consumer_offsets partition)."""
        self.participants.group_offsets.check_member(commit)
        if self.clustered:
            await self.participants.keep_pending_offsets(commit)
            return
        await self._request(
            commit.transactional_id, lambda: self.machine.txn_offset_commit(commit), settle=False
        )

    async def apply_pending_offsets(
        self, producer_id: int, accept: Callable[[str], bool], commit: bool
    ) -> None:
        """Group side (cluster): see :meth:`Participants.apply_pending_offsets`."""
        await self.participants.apply_pending_offsets(producer_id, accept, commit)

    @to_the_end
    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        """EndTxn: answered once the Prepare state is durable; the markers follow in the
        background (a retried EndTxn waits for them like any call on the id)."""
        self.slots.check_owner(transactional_id)
        await self._request(
            transactional_id,
            lambda: self.machine.end_txn(transactional_id, producer_id, epoch, commit, _now_ms()),
        )

    def check_produce(self, transactional_id: str, producer_id: int, epoch: int, stream_id: int) -> ErrorCode:
        """May this producer write a transactional batch to this stream now?"""
        return self.machine.check_produce(transactional_id, producer_id, epoch, stream_id)

    async def verify_produce(
        self, transactional_id: str, producer_id: int, epoch: int, stream_id: int, topic: str, partition: int
    ) -> ErrorCode:
        """:meth:`check_produce` on a node; in a cluster against the transaction's row (see
        :mod:`.verification`)."""
        if not self.clustered:
            return self.check_produce(transactional_id, producer_id, epoch, stream_id)
        return await self.participants.verifier.verify(
            transactional_id, producer_id, epoch, stream_id, topic, partition
        )

    async def partitions_gained(self, stream_ids: Sequence[int]) -> None:
        await self.participants.partitions_gained(stream_ids)

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self.machine.get(transactional_id)

    def all(self) -> list[TxnMetadata]:
        return list(self.machine.txns.values())

    # --- timeouts -------------------------------------------------------------------------------
    async def _expire_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.abort_timed_out()
            except Exception:
                log.exception("aborting timed-out transactions failed")

    async def abort_timed_out(self, now_ms: int | None = None) -> int:
        """Abort (and fence) every Ongoing transaction older than its timeout; returns how many.
        Then forget ids idle for ``transactional.id.expiration.ms``."""
        now = _now_ms() if now_ms is None else now_ms
        expired = self.machine.timed_out(now)
        for tid in expired:
            async with self._lock(tid):
                await self._run(functools.partial(self.machine.time_out, tid, now), tid, "timed out")
        idle_ms = int(self._broker.config.get(settings.ID_EXPIRATION.name))
        for tid in self.machine.idle(now, idle_ms):
            async with self._lock(tid):
                await self.perform_event(tid, functools.partial(self.machine.expire, tid, now, idle_ms))
        return len(expired)

    # --- helpers --------------------------------------------------------------------------------
    def _serving(self, transactional_id: str) -> None:
        if not self._ready:
            raise TxnError(ErrorCode.coordinator_load_in_progress, "transactions are being recovered")
        self.slots.check_owner(transactional_id)

    def _exists(self, topic_name: str, index: int) -> bool:
        topic = self._broker.topics.get(topic_name)
        return topic is not None and 0 <= index < topic.partition_count

    async def _request(self, tid: str, event: Callable[[], list[Action]], settle: bool = True) -> Respond:
        """A producer's request on ``tid``: handed to the state machine under the id's lock (once
        the markers of its ended transaction are in, or the wait for them is over, unless not
        ``settle``) and answered. Raises TxnError."""
        if settle:
            await self.settled(tid)
        async with self._lock(tid):
            self._serving(tid)
            return _answer(await self._respond(tid, event))

    async def _respond(self, tid: str, event: Callable[[], list[Action]]) -> Respond | None:
        outcome = await self.perform_event(tid, event)
        assert not isinstance(outcome, NeedProducerId | Again), f"a request's event ended with {outcome}"
        return outcome
