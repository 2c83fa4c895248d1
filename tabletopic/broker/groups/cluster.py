"""What the group coordinator needs from the cluster (see ``docs/cluster.md``): which coordinator
slot a group hashes to, the database check that this incarnation still leads a slot at the leader
epoch it loaded it with (run in the same database transaction as every write of group state and
offsets, as transaction state is), and the way to give a slot up when such a write was refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.engine import Connection

from tabletopic.broker.leadership import GROUP_SLOTS_TOPIC, ClusterMember, group_slot
from tabletopic.cluster.db import check_leadership
from tabletopic.ids import LeaderEpoch


class GroupSlots(Protocol):
    """What the group coordinator needs from the cluster; a Protocol so the coordinator's tests
    can stand in for the database check."""

    def slot(self, group_id: str) -> int:
        """The coordinator slot ``group_id`` hashes to."""
        ...

    def holds_slot(self, conn: Connection, slot: int, leader_epoch: LeaderEpoch) -> bool:
        """Blocking, inside a write's database transaction: whether this incarnation still leads
        ``slot`` at ``leader_epoch`` with a valid lease (locking the slot's row)."""
        ...

    def give_up(self, slot: int) -> None:
        """A write of ``slot`` was refused: stop leading it here until the controller's placement
        is read again (it is taken again, and reloaded, if it still names this incarnation)."""
        ...


@dataclass(frozen=True, slots=True)
class SlotFence:
    """The fence of one write, taken when the write was decided: the slot and the leader epoch this
    broker held it at then (None: not coordinated here), so a write decided before the slot was
    lost can never pass under a later epoch of the same slot."""

    cluster: GroupSlots
    slot: int
    epoch: LeaderEpoch | None

    def __call__(self, conn: Connection) -> bool:
        return self.epoch is not None and self.cluster.holds_slot(conn, self.slot, self.epoch)


class GroupCluster:
    """:class:`GroupSlots` of one cluster broker: its group coordinator slots
    (``offsets.topic.num.partitions``), checked against the cluster's tables.

    Args:
        role: this broker's part in the cluster (slot count, node id and epoch, leadership).
    """

    def __init__(self, role: ClusterMember) -> None:
        self._role = role

    def slot(self, group_id: str) -> int:
        return group_slot(group_id, self._role.group_slots)

    def holds_slot(self, conn: Connection, slot: int, leader_epoch: LeaderEpoch) -> bool:
        """Blocking, inside the writer's database transaction: whether this incarnation still
        leads ``slot`` at ``leader_epoch`` with a valid lease (locks the slot's row against a
        concurrent change of leader)."""
        node = self._role.node
        return check_leadership(conn, (GROUP_SLOTS_TOPIC, slot), node.node_id, node.node_epoch, leader_epoch)

    def give_up(self, slot: int) -> None:
        self._role.give_up((GROUP_SLOTS_TOPIC, slot))
