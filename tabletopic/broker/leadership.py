"""Who leads what, as the request handlers need it: whether this broker may serve a partition,
which broker and leader epoch to report for it, the brokers to list and the controller.

One broker alone leads everything in epoch 0 (:class:`SingleNode`); in cluster mode
:class:`tabletopic.broker.cluster_role.ClusterRole` answers from the cluster's shared state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tabletopic.cluster.controller import PartitionKey, group_slot
from tabletopic.cluster.db import BrokerNotRegistered, UnregisterRefused
from tabletopic.cluster.node import ClusterNode

__all__ = [
    "GROUP_SLOTS_TOPIC",
    "SLOT_TOPICS",
    "TXN_SLOTS_TOPIC",
    "BrokerEndpoint",
    "ClusterMember",
    "Leadership",
    "SingleNode",
    "group_slot",
]

GROUP_SLOTS_TOPIC = "__consumer_offsets"  # the coordinator slots of groups, placed like partitions
# The coordinator slots of transactional ids (``transaction.state.log.num.partitions``), hashed from
# the transactional id as groups are: Kafka's __transaction_state partitions, without the log.
TXN_SLOTS_TOPIC = "__transaction_state"
SLOT_TOPICS = frozenset((GROUP_SLOTS_TOPIC, TXN_SLOTS_TOPIC))  # placed like partitions, hold no data


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class Leadership(Protocol):
    def leads(self, topic: str, partition: int) -> bool:
        """Whether this broker serves the partition now (its streams are open with its epoch)."""

    def serving_epoch(self, topic: str, partition: int) -> int | None:
        """The leader epoch this broker serves the partition with; None when it does not lead it.
        Clients name the epoch they know (KIP-320) and are told when it is stale or newer."""

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        """``(node id, leader epoch)`` to report; a predicted leader while a partition moves."""

    def leaders_version(self) -> int | None:
        """A number that changes whenever :meth:`leader` may answer differently for any partition,
        so Metadata can keep a topic's partition entries until it does; None: keep nothing."""

    def brokers(self, listener: str) -> list[BrokerEndpoint]:
        """Live brokers with their endpoint on ``listener`` (the client's security protocol)."""

    def controller_id(self) -> int:
        """The controller's node id (-1 when none)."""

    def group_coordinator(self, group_id: str) -> int:
        """The broker coordinating ``group_id``."""

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The broker coordinating ``transactional_id``."""

    def reassignments(self) -> dict[tuple[str, int], tuple[int, int]]:
        """Moves under way: ``{(topic, partition): (current leader, target)}``."""

    async def reassign(self, moves: list[tuple[str, int, int | None]]) -> list[tuple[str, int]]:
        """Ask for ``(topic, partition, node)`` moves (node None cancels one); returns the
        partitions the controller does not know (yet)."""

    async def unregister(self, node_id: int, by: str) -> None:
        """Remove broker ``node_id``, which left for good, from the cluster (``by``: who asked).
        Raises :class:`~tabletopic.cluster.db.UnregisterRefused` saying why not."""


class ClusterMember(Leadership, Protocol):
    """Leadership in a cluster, with what the coordinators and the zone router need besides:
    this broker's membership and the group coordinator slots (the cluster role answers it)."""

    @property
    def node(self) -> ClusterNode:
        """This broker's membership: node id and epoch, rack, the cluster's live nodes."""
        ...

    @property
    def group_slots(self) -> int:
        """``offsets.topic.num.partitions``: the coordinator slots consumer groups hash to."""
        ...

    def give_up(self, key: PartitionKey) -> None:
        """Stop leading ``key`` (a coordinator slot) here until the placement is read again."""
        ...


class SingleNode:
    """One broker is the whole cluster: it leads every partition in epoch 0 and every group."""

    def __init__(self, node_id: int, endpoint: Callable[[str], BrokerEndpoint]) -> None:
        self._node_id = node_id
        self._endpoint = endpoint

    def leads(self, topic: str, partition: int) -> bool:
        return True

    def serving_epoch(self, topic: str, partition: int) -> int | None:
        return 0

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return self._node_id, 0

    def leaders_version(self) -> int | None:
        return 0

    def brokers(self, listener: str) -> list[BrokerEndpoint]:
        return [self._endpoint(listener)]

    def controller_id(self) -> int:
        return self._node_id

    def group_coordinator(self, group_id: str) -> int:
        return self._node_id

    def transaction_coordinator(self, transactional_id: str) -> int:
        return self._node_id

    def reassignments(self) -> dict[tuple[str, int], tuple[int, int]]:
        return {}

    async def reassign(self, moves: list[tuple[str, int, int | None]]) -> list[tuple[str, int]]:
        return []

    async def unregister(self, node_id: int, by: str) -> None:
        if node_id == self._node_id:
            raise UnregisterRefused(f"broker {node_id} is this single node, and it is alive")
        raise BrokerNotRegistered(
            f"broker {node_id} is not registered: this single node is broker {self._node_id}"
        )
