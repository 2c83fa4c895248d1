"""What the transaction state machine asks its driver to do, in the order given (the h11 pattern:
events in, actions out). Frozen values with no I/O, so a unit test reads them as the coordinator's
decisions."""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.model import PendingOffset, TxnMetadata, TxnPartition


@dataclass(frozen=True, slots=True)
class Persist:
    """Write the transactional id's row as ``txn`` (a snapshot) says. ``at_once`` False: a single
    node's Complete state, which the driver may leave for the next write of the row to carry (a
    crash before only makes the restart write the markers once more)."""

    txn: TxnMetadata
    at_once: bool = True


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete the expired transactional id's row, then have the machine ``forget`` the id."""

    transactional_id: str


@dataclass(frozen=True, slots=True)
class WriteMarkers:
    """Write the COMMIT or ABORT marker of the transaction to each of ``partitions`` (through their
    leaders) and, in a cluster, have the coordinators of ``groups`` commit (or drop) the offsets the
    transaction gave them; retried until done. Then hand ``markers_written`` to the machine.
    ``in_background``: EndTxn is answered without waiting (the id stays busy meanwhile); otherwise
    the event that asked for it waits (recovery, a timeout, a fenced transaction)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TxnPartition, ...]
    groups: tuple[str, ...]
    in_background: bool
    # Single node, commit: the offsets to commit by group, after the markers and before
    # :meth:`markers_written` (so a failure retries them with the markers, never loses them).
    offsets: dict[str, dict[tuple[str, int], PendingOffset]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NeedProducerId:
    """The epoch is exhausted: allocate a new producer id and hand the same event in again with it
    (nothing was changed; like h11's NEED_DATA)."""


@dataclass(frozen=True, slots=True)
class Again:
    """Once the actions before it are done, hand the same event in again, with this producer id and
    epoch: an InitProducerId that first had to abort the open transaction it fences (its producer
    was checked already; the abort bumped the epoch it named)."""

    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class Respond:
    """Answer the request: ``code`` (NONE when served), InitProducerId's producer id and epoch,
    AddPartitionsToTxn's code per partition. Always the last action of a request's event."""

    code: ErrorCode = ErrorCode.none
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[tuple[tuple[str, int], ErrorCode], ...] = ()
    reason: str = field(default="", compare=False)


# The actions that end an event: the driver hands them back to the event's caller instead of
# carrying them out (an answer, or a request to hand the event in again).
Outcome = NeedProducerId | Again | Respond
Action = Persist | Delete | WriteMarkers | Outcome


def refuse(code: ErrorCode, reason: str) -> list[Action]:
    """The request is refused with ``code``; nothing changed."""
    return [Respond(code, reason=reason)]
