"""Plain data of a transactional id: its state (Kafka's names), the partitions and pending group
offsets of its open transaction. No I/O: the state machine (:mod:`.machine`) changes these records
and the store (:mod:`.store`) writes them as rows."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

# The largest producer epoch; a bump past it takes a new producer id at epoch 0 (as Kafka does).
MAX_EPOCH = 32767


class TxnState(enum.StrEnum):
    """Kafka's transaction states, spelled as DescribeTransactions and ListTransactions report them
    and as the ``transactions`` table stores them (a ``str``, so the row and the wire take it as
    is)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


# The names ListTransactions accepts as state filters.
STATES = tuple(state.value for state in TxnState)
PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
COMPLETED = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
# What a partition's new leader reads as a transaction still open in the partition.
UNFINISHED = (TxnState.ONGOING.value, TxnState.PREPARE_COMMIT.value, TxnState.PREPARE_ABORT.value)


@dataclass(frozen=True, slots=True)
class TxnPartition:
    topic: str
    partition: int
    stream_id: int
    start: int  # the stream's end offset when the partition joined: no batch of the txn is earlier


@dataclass(frozen=True, slots=True)
class PendingOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class TxnOffsets:
    """One TxnOffsetCommit: a transaction's offsets for one group, held until it ends. It travels
    whole from the handler to the state machine (single node), or to the group's coordinator and
    its store (cluster), which check its producer and epoch against the transaction's."""

    transactional_id: str
    producer_id: int
    epoch: int
    group_id: str
    offsets: tuple[PendingOffset, ...]
    # The consumer's place in its group (TxnOffsetCommit v3 on, KIP-447): checked like an
    # OffsetCommit's, so a member the group has moved on from cannot commit its transaction.
    member_id: str = ""
    generation_id: int = -1
    group_instance_id: str | None = None


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id's state (the row of ``transactions``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: TxnState
    timeout_ms: int
    started_ms: int = -1
    updated_ms: int = -1
    partitions: dict[tuple[str, int], TxnPartition] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], PendingOffset]] = field(default_factory=dict)

    def snapshot(self) -> TxnMetadata:
        """A copy the state machine's later changes do not reach (what a write action carries)."""
        return dataclasses.replace(
            self,
            partitions=dict(self.partitions),
            offsets={group: dict(offsets) for group, offsets in self.offsets.items()},
        )

    def take_back(self, before: TxnMetadata) -> None:
        """Become ``before`` again (a snapshot of this record), keeping this object."""
        for name in (f.name for f in dataclasses.fields(self)):
            setattr(self, name, getattr(before, name))

    def stream_ids(self) -> set[int]:
        return {part.stream_id for part in self.partitions.values()}
