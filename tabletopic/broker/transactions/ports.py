"""What the transaction package needs from the rest of the broker, as narrow Protocols: the
coordinator's state machine driver sees markers only as "write these to the partitions' leaders"
(:class:`MarkerWriter`), and the partition side sees the broker only as :class:`TxnBroker`
(``BrokerService`` is one), never the whole service."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tabletopic.broker.leadership import Leadership
    from tabletopic.broker.producers import ProducerStates
    from tabletopic.broker.topics import TopicRegistry
    from tabletopic.broker.transactions.actions import WriteMarkers
    from tabletopic.broker.transactions.model import TxnPartition
    from tabletopic.config import Config
    from tabletopic.s3stream.streams import StreamStore


class TxnBroker(Protocol):
    """The broker as transactions use it: its settings, topics, streams, producer states and who
    leads what."""

    config: Config
    clustered: bool
    node_id: int
    topics: TopicRegistry
    store: StreamStore
    producers: ProducerStates
    leadership: Leadership

    async def allocate_producer_id(self) -> int: ...


class MarkerWriter(Protocol):
    """Writes a transaction's COMMIT or ABORT markers through the partitions' leaders, and has the
    groups' coordinators commit its offsets (cluster mode; a group is named by its id)."""

    async def write(
        self, marked: WriteMarkers, pending: Sequence[TxnPartition | str], coordinator_epoch: int
    ) -> list[TxnPartition | str]:
        """One attempt at every pending marker and group at once; returns what must be tried
        again (a leader failing over)."""
        ...
