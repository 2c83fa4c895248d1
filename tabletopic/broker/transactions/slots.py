"""Which transactional ids this broker coordinates: all of them on a single node; in a cluster
those of the coordinator slots it leads, each with the leader epoch it loaded the slot at (every
write of the slot's rows is fenced by it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Connection

from tabletopic.broker.transactions.participants import TxnError
from tabletopic.broker.transactions.store import Fence

if TYPE_CHECKING:
    from tabletopic.broker.transactions.cluster import TxnCluster


class CoordinatorSlots:
    def __init__(self, clustered: bool) -> None:
        self.clustered = clustered
        self.cluster: TxnCluster | None = None
        self.held: dict[int, int] = {}  # slot -> the leader epoch it was loaded at
        self.loading: set[int] = set()

    def attach(self, cluster: TxnCluster) -> None:
        self.cluster = cluster

    def owns(self, transactional_id: str) -> bool:
        """Whether this broker coordinates ``transactional_id`` (always, on a single node)."""
        if not self.clustered:
            return True
        return self.cluster is not None and self.cluster.slot(transactional_id) in self.held

    def check_owner(self, transactional_id: str) -> None:
        """Raises TxnError (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) unless this broker
        coordinates the id now."""
        if not self.clustered:
            return
        slot = None if self.cluster is None else self.cluster.slot(transactional_id)
        if slot is not None and slot in self.loading:
            raise TxnError(ErrorCode.coordinator_load_in_progress, f"transaction slot {slot} is being loaded")
        if slot is None or slot not in self.held:
            raise TxnError(
                ErrorCode.not_coordinator,
                f"this broker does not coordinate transactional id {transactional_id}",
            )

    def marker_epoch(self, transactional_id: str) -> int:
        """The coordinator epoch markers carry (the slot's leader epoch; 0 on a single node)."""
        cluster = self.cluster
        return 0 if cluster is None else self.held.get(cluster.slot(transactional_id), 0)

    def fence(self, transactional_id: str) -> tuple[int, Fence]:
        """The slot of ``transactional_id`` and the check a write of its row runs in its database
        transaction: that this incarnation still leads the slot at the epoch it loaded it with.
        Raises TxnError(NOT_COORDINATOR) if the slot is no longer held."""
        cluster = self.cluster
        slot = None if cluster is None else cluster.slot(transactional_id)
        epoch = None if slot is None else self.held.get(slot)
        if cluster is None or slot is None or epoch is None:
            raise TxnError(ErrorCode.not_coordinator, f"transaction slot of {transactional_id} moved away")
        held_slot, held_epoch = slot, epoch

        def holds(conn: Connection) -> bool:
            return cluster.holds_slot(conn, held_slot, held_epoch)

        return slot, holds
