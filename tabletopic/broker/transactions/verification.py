"""Cluster mode: a partition's leader verifies a transactional produce against the transaction's
row in the metadata database (written by AddPartitionsToTxn before it answered), as KIP-890's
verification asks the coordinator. The leader is usually not the transaction's coordinator, so the
row is its only word on which partitions the open transaction has added.

A verdict is kept per (stream, producer) until the transaction's marker, so a transaction reads
the row once per partition. The partitions of one transaction that a broker leads arrive together
(one ProduceRequest carries them all), so their reads of the row are shared: one read answers
every produce that arrives while it is under way.

A read that began before a marker may describe the transaction that marker ends, and a delayed
produce of that transaction (a zombie) would then be let in after its marker: the hanging
transaction KIP-890 exists to prevent. So a verdict is neither kept nor shared once any marker has
begun since its read did; the produce reads the row afresh instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.model import TxnMetadata, TxnState
from tabletopic.broker.transactions.store import TxnStore


@dataclass(frozen=True, slots=True)
class _RowRead:
    task: asyncio.Future[TxnMetadata | None]
    # The marker count when the read began (see ProduceVerifier.marker_begins).
    markers: int


def verdict(txn: TxnMetadata | None, producer_id: int, epoch: int, topic: str, partition: int) -> ErrorCode:
    """Whether the transaction's row lets this producer write this partition now."""
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if epoch < txn.producer_epoch:
        return ErrorCode.invalid_producer_epoch
    if txn.state is not TxnState.ONGOING or (topic, partition) not in txn.partitions:
        return ErrorCode.invalid_txn_state
    return ErrorCode.none


class ProduceVerifier:
    """Verifies transactional produces against the transactions' rows; see the module's text."""

    def __init__(self, store: TxnStore) -> None:
        self._store = store
        # (stream id, producer id) -> (transactional id, epoch) verified, until the marker.
        self._verified: dict[tuple[int, int], tuple[str, int]] = {}
        # Markers begun on this broker, of any producer: a coarse clock, so it stays one integer.
        self._markers = 0
        # Reads of a transaction's row under way, by transactional id.
        self._reads: dict[str, _RowRead] = {}

    async def verify(
        self, transactional_id: str, producer_id: int, epoch: int, stream_id: int, topic: str, partition: int
    ) -> ErrorCode:
        key = (stream_id, producer_id)
        if self._verified.get(key) == (transactional_id, epoch):
            return ErrorCode.none
        read, shared = self._read(transactional_id, share=True)
        code = verdict(await asyncio.shield(read.task), producer_id, epoch, topic, partition)
        if shared and (code is not ErrorCode.none or read.markers != self._markers):
            # The read began before this produce arrived: only a yes it still vouches for counts.
            read, _ = self._read(transactional_id, share=False)
            code = verdict(await asyncio.shield(read.task), producer_id, epoch, topic, partition)
        if code is ErrorCode.none and read.markers == self._markers:
            self._verified[key] = (transactional_id, epoch)
        return code

    def marker_begins(self) -> None:
        """Call before a marker is appended here: reads begun until now vouch for nothing more."""
        self._markers += 1

    def marker_written(self, stream_id: int, producer_id: int) -> None:
        """The marker ends what was verified for the producer in the stream."""
        self._verified.pop((stream_id, producer_id), None)

    def forget_streams(self, stream_ids: set[int]) -> None:
        """Leadership of these streams was gained again: verify their produces afresh (their
        markers may have been written by the broker that led them meanwhile)."""
        self._markers += 1
        for key in [k for k in self._verified if k[0] in stream_ids]:
            del self._verified[key]

    def _read(self, transactional_id: str, share: bool) -> tuple[_RowRead, bool]:
        """The read of the row under way (when ``share`` and there is one: second item True), else
        a new one."""
        current = self._reads.get(transactional_id)
        if share and current is not None:
            return current, True
        loading = asyncio.ensure_future(asyncio.to_thread(self._store.load_one, transactional_id))
        read = _RowRead(loading, self._markers)
        self._reads[transactional_id] = read

        def done(task: asyncio.Future[TxnMetadata | None]) -> None:
            if self._reads.get(transactional_id) is read:
                del self._reads[transactional_id]
            if not task.cancelled():
                task.exception()  # retrieved here too: every awaiting produce may have gone

        read.task.add_done_callback(done)
        return read, False
