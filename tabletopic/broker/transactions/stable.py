"""The committed part of partitions, for a reader that may run on another broker than their leader:
the table coordinator, which runs on the leader of a topic's partition 0 and ingests every
partition of the topic.

Only a partition's leader knows its open transactions (they live in its memory), so the last
stable offset of a partition led elsewhere comes from that leader, the way a Kafka client learns it:
ListOffsets with isolation_level READ_COMMITTED and timestamp latest, over the broker's inter-broker
client, one request per leader, all at once. A leader that cannot be asked (moving, down, not the
leader any more) leaves its partitions out: the reader does not ingest them this time, never past
an unknown last stable offset. The aborted transactions of such a partition come from the durable
aborted index in the metadata database, which every broker reads: its leader records an aborted
transaction there before its last stable offset moves past the records, so an offset learnt from
the leader never runs ahead of the index. Partitions led here take no network call and no query.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from tabletopic.broker.security.inter_broker import BrokerUnreachable

if TYPE_CHECKING:
    from tabletopic.broker.leadership import Leadership
    from tabletopic.broker.security.inter_broker import InterBrokerClient
    from tabletopic.broker.transactions.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 4
# ListOffsets' wire values: isolation_level READ_COMMITTED, and the timestamp asking for the end
# (the last stable offset under READ_COMMITTED). Spelled here so no module below the handlers
# imports them.
READ_COMMITTED, LATEST = 1, -1


class CommittedSource(Protocol):
    """What :class:`CommittedOffsets` reads of its broker (``BrokerService`` is one)."""

    node_id: int
    leadership: Leadership
    transactions: TransactionCoordinator
    inter_broker_client: InterBrokerClient


QUERY_TIMEOUT_S = 5.0


class CommittedOffsets:
    """Last stable offsets and aborted transactions of any partition, from wherever they are known.

    Args:
        service: this broker (its leadership, transactions and inter-broker client).
    """

    def __init__(self, service: CommittedSource) -> None:
        self._service = service

    async def last_stable_offsets(
        self, topic: str, partitions: Sequence[tuple[int, int, int]]
    ) -> dict[int, int]:
        """The last stable offset of each ``(partition, stream id, high watermark)``, at most its
        high watermark (as this broker sees it); a partition whose leader could not tell is left
        out.

        Args:
            topic: the topic's name.
            partitions: ``(partition, stream id, high watermark)`` of the partitions wanted.

        Returns:
            ``{partition: last stable offset}``.
        """
        service = self._service
        leadership = service.leadership
        known: dict[int, int] = {}
        for partition, stream_id, high_watermark in partitions:
            if leadership.leads(topic, partition):
                known[partition] = service.transactions.partitions.last_stable_offset(
                    stream_id, high_watermark
                )
        by_leader = self._led_elsewhere(topic, [partition for partition, _, _ in partitions])
        if by_leader:
            answers = await asyncio.gather(
                *(self._ask(node, topic, items) for node, items in by_leader.items())
            )
            high = {partition: high_watermark for partition, _, high_watermark in partitions}
            for answer in answers:
                for partition, stable in answer.items():
                    if partition in high:  # only what was asked
                        known[partition] = min(stable, high[partition])
        return known

    async def aborted_transactions(
        self, topic: str, ranges: Sequence[tuple[int, int, int, int]]
    ) -> dict[int, list[tuple[int, int, int]]]:
        """For each ``(partition, stream id, start, end)``: ``(producer id, first offset, marker
        offset)`` of the aborted transactions overlapping ``[start, end)``; from memory for the
        partitions this broker leads, for the others from the metadata database (one query)."""
        transactions = self._service.transactions
        leadership = self._service.leadership
        result: dict[int, list[tuple[int, int, int]]] = {}
        elsewhere: dict[int, int] = {}  # stream id -> partition
        for partition, stream_id, start, end in ranges:
            if leadership.leads(topic, partition):
                result[partition] = transactions.partitions.aborted_transactions(stream_id, start, end)
            else:
                elsewhere[stream_id] = partition
        if elsewhere:
            wanted = [(sid, start, end) for _, sid, start, end in ranges if sid in elsewhere]
            stored = await asyncio.to_thread(transactions.store.aborted_between, wanted)
            for stream_id, entries in stored.items():
                result[elsewhere[stream_id]] = entries
        return result

    async def upload_on_leaders(self, topic: str, partitions: Sequence[int]) -> None:
        """Ask the leaders of ``partitions`` on other brokers to upload what they acknowledged
        before answering (a ListOffsets as a replica: see the ListOffsets handler), all at once;
        a leader that does not answer is skipped (the reader sees its last upload, as before)."""
        by_leader = self._led_elsewhere(topic, partitions)
        await asyncio.gather(
            *(self._ask(node, topic, items, as_replica=True) for node, items in by_leader.items())
        )

    def _led_elsewhere(self, topic: str, partitions: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
        """The partitions another broker leads, by leader: ``{node: [(partition, leader epoch)]}``.
        One this broker is named leader of without serving it (being opened or released here) is
        left out: nobody can tell about it now."""
        leadership, me = self._service.leadership, self._service.node_id
        by_leader: dict[int, list[tuple[int, int]]] = {}
        for partition in partitions:
            if leadership.leads(topic, partition):
                continue
            node, epoch = leadership.leader(topic, partition)
            if node != me:
                by_leader.setdefault(node, []).append((partition, epoch))
        return by_leader

    async def _ask(
        self, node: int, topic: str, items: list[tuple[int, int]], as_replica: bool = False
    ) -> dict[int, int]:
        """The last stable offsets ``node`` answers for ``items`` (partition, leader epoch); the
        partitions it could not answer are left out. ``as_replica``: asked with this broker's id
        as the replica, which makes the leader upload those partitions first."""
        client = self._service.inter_broker_client
        brokers = self._service.leadership.brokers(client.listener)
        fields: dict[str, Any] = {
            "replica_id": self._service.node_id if as_replica else -1,
            "isolation_level": READ_COMMITTED,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": epoch, "timestamp": LATEST}
                        for p, epoch in items
                    ],
                }
            ],
        }
        try:
            answer = await client.call(
                brokers, node, LIST_OFFSETS, LIST_OFFSETS_VERSION, QUERY_TIMEOUT_S, **fields
            )
        except (LookupError, BrokerUnreachable) as exc:
            log.info("last stable offsets of %s %s: broker %d unreachable: %s", topic, items, node, exc)
            return {}
        result: dict[int, int] = {}
        for entry in answer.topics:
            for part in entry.partitions:
                if ErrorCode(part.error_code) is ErrorCode.none and int(part.offset) >= 0:
                    result[int(part.partition_index)] = int(part.offset)
                else:
                    log.debug(
                        "last stable offset of %s-%d not known: %s",
                        topic,
                        part.partition_index,
                        ErrorCode(part.error_code).name,
                    )
        return result
