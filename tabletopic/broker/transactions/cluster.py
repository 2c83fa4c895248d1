"""What the transaction coordinator needs from the cluster (see ``docs/cluster.md``): which slot a
transactional id hashes to, the database check that this incarnation still leads a slot (run in the
same database transaction as every write of transaction state), and the way to a partition's
leader for markers: WriteTxnMarkers, as Kafka's coordinator sends them, over the broker's wire
client on the leader's inter-broker listener (``inter.broker.listener.name``, with the broker's own
TLS and SASL settings)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, TypedDict

from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Connection

from tabletopic.broker.leadership import TXN_SLOTS_TOPIC, ClusterMember, group_slot
from tabletopic.broker.security.inter_broker import BrokerUnreachable
from tabletopic.cluster.db import check_leadership
from tabletopic.ids import LeaderEpoch

if TYPE_CHECKING:
    from tabletopic.broker.security.inter_broker import InterBrokerClient

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
MARKER_TIMEOUT_S = 10.0


class _TransactionFields(TypedDict):
    """A WriteTxnMarkers marker's fields that name the transaction (the same for every leader)."""

    producer_id: int
    producer_epoch: int
    transaction_result: bool
    coordinator_epoch: int


class TxnCluster:
    """Transaction coordinator slots of one cluster broker.

    Args:
        role: this broker's part in the cluster (leaders, endpoints, node epoch).
        slots: ``transaction.state.log.num.partitions``.
        client: how this broker connects to the others' inter-broker listener.
    """

    def __init__(self, role: ClusterMember, slots: int, client: InterBrokerClient) -> None:
        self._role = role
        self.slots = slots
        self._client = client

    def group_slot(self, group_id: str) -> int:
        """The coordinator slot of a consumer group (``offsets.topic.num.partitions``)."""
        return group_slot(group_id, self._role.group_slots)

    def slot(self, transactional_id: str) -> int:
        """The coordinator slot of ``transactional_id`` (Kafka's hash, as groups use)."""
        return group_slot(transactional_id, self.slots)

    def holds_slot(self, conn: Connection, slot: int, leader_epoch: int) -> bool:
        """Blocking, inside the writer's database transaction: whether this incarnation still
        leads ``slot`` at ``leader_epoch`` (locks the slot's row against a concurrent change)."""
        node = self._role.node
        # LeaderEpoch(): the coordinator keeps its slots' epochs as plain ints until it is typed.
        epoch = LeaderEpoch(leader_epoch)
        return check_leadership(conn, (TXN_SLOTS_TOPIC, slot), node.node_id, node.node_epoch, epoch)

    async def send_markers(
        self,
        partitions: list[tuple[str, int]],
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        epoch: int,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Ask each partition's leader to write the marker, one request per leader, all at once;
        each partition's error code (a retriable one when its leader could not be reached)."""
        marker = _TransactionFields(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transaction_result=commit,
            coordinator_epoch=epoch,
        )
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for topic, partition in partitions:
            by_leader.setdefault(self._role.leader(topic, partition)[0], []).append((topic, partition))
        answers = await asyncio.gather(
            *(self._send(node, items, marker) for node, items in by_leader.items())
        )
        return {key: code for answer in answers for key, code in answer.items()}

    async def _send(
        self, node: int, items: list[tuple[str, int]], marker: _TransactionFields
    ) -> dict[tuple[str, int], ErrorCode]:
        """One WriteTxnMarkers request to ``node``: ``marker`` (the transaction's fields of the
        marker, the same for every leader) for the partitions ``items``."""
        topics: dict[str, list[int]] = {}
        for topic, partition in items:
            topics.setdefault(topic, []).append(partition)
        named = [{"name": t, "partition_indexes": p} for t, p in topics.items()]
        fields: dict[str, Any] = {"markers": [{**marker, "topics": named}]}
        brokers = self._role.brokers(self._client.listener)
        try:
            answer = await self._client.call(brokers, node, WRITE_TXN_MARKERS, 1, MARKER_TIMEOUT_S, **fields)
        except LookupError:
            return dict.fromkeys(items, ErrorCode.coordinator_not_available)
        except BrokerUnreachable as exc:
            log.info("markers for %s: broker %d unreachable: %s", items, node, exc)
            return dict.fromkeys(items, ErrorCode.network_exception)
        result = {
            (str(topic.name), int(part.partition_index)): ErrorCode(part.error_code)
            for marker in answer.markers
            for topic in marker.topics
            for part in topic.partitions
        }
        return {key: result.get(key, ErrorCode.unknown_server_error) for key in items}
