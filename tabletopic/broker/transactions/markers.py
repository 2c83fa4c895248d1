"""Markers through the partitions' leaders: the :class:`~.ports.MarkerWriter` a broker gives its
transaction coordinator. The markers of partitions led here are appended together (they share the
next WAL write); in a cluster each other leader gets one WriteTxnMarkers, and each group's
coordinator commits the transaction's offsets of the group (here, or through WriteTxnMarkers naming
the group's slot, as Kafka's coordinator writes a marker to the group's offsets partition)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.groups.store import GroupFenced
from tabletopic.broker.leadership import GROUP_SLOTS_TOPIC
from tabletopic.broker.transactions.actions import WriteMarkers
from tabletopic.broker.transactions.model import TxnPartition
from tabletopic.broker.transactions.participants import Participants
from tabletopic.broker.transactions.ports import TxnBroker
from tabletopic.s3stream.streams import StreamError

if TYPE_CHECKING:
    from tabletopic.broker.transactions.cluster import TxnCluster

log = logging.getLogger(__name__)


class LeaderMarkers:
    """Writes markers here or through their leaders; commits group offsets through their
    coordinators (cluster mode, :meth:`attach_cluster`)."""

    def __init__(self, broker: TxnBroker, participants: Participants) -> None:
        self._broker = broker
        self._participants = participants
        self._cluster: TxnCluster | None = None

    def attach_cluster(self, cluster: TxnCluster) -> None:
        self._cluster = cluster

    async def write(
        self, marked: WriteMarkers, pending: Sequence[TxnPartition | str], coordinator_epoch: int
    ) -> list[TxnPartition | str]:
        cluster, leadership = self._cluster, self._broker.leadership
        remote: list[TxnPartition] = []
        here: list[TxnPartition | str] = []
        for part in pending:
            if (
                isinstance(part, TxnPartition)
                and cluster is not None
                and not leadership.leads(part.topic, part.partition)
            ):
                remote.append(part)
            else:
                here.append(part)
        jobs = [
            self._commit_group_offsets(marked, part, coordinator_epoch)
            if isinstance(part, str)
            else self._write_local(marked, part)
            for part in here
        ]
        done = await asyncio.gather(*jobs)
        failed = [part for part, ok in zip(here, done, strict=True) if not ok]
        if remote and cluster is not None:
            codes = await cluster.send_markers(
                [(p.topic, p.partition) for p in remote],
                marked.producer_id,
                marked.producer_epoch,
                marked.commit,
                coordinator_epoch,
            )
            for part in remote:
                code = codes.get((part.topic, part.partition), ErrorCode.unknown_server_error)
                if code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):  # deleted: no marker
                    log.info(
                        "transaction %s: marker for %s-%d not written yet: %s",
                        marked.transactional_id,
                        part.topic,
                        part.partition,
                        code.name,
                    )
                    failed.append(part)
        return failed

    async def _commit_group_offsets(
        self, marked: WriteMarkers, group_id: str, coordinator_epoch: int
    ) -> bool:
        """Cluster: have the group's coordinator commit the transaction's offsets of the group;
        False: try again."""
        broker, cluster = self._broker, self._cluster
        node = broker.leadership.group_coordinator(group_id)
        if node == broker.node_id or cluster is None:
            try:
                await self._participants.apply_pending_offsets(
                    marked.producer_id, lambda g: g == group_id, True
                )
            except GroupFenced as exc:  # the group's slot moved: its new coordinator is asked next
                log.info(
                    "transaction %s: offsets of group %s not committed here: %s",
                    marked.transactional_id,
                    group_id,
                    exc,
                )
                return False
            return True
        key = (GROUP_SLOTS_TOPIC, cluster.group_slot(group_id))
        codes = await cluster.send_markers(
            [key], marked.producer_id, marked.producer_epoch, True, coordinator_epoch
        )
        code = codes.get(key, ErrorCode.unknown_server_error)
        if code is not ErrorCode.none:
            log.info(
                "transaction %s: offsets of group %s not committed yet: %s",
                marked.transactional_id,
                group_id,
                code.name,
            )
        return code is ErrorCode.none

    async def _write_local(self, marked: WriteMarkers, part: TxnPartition) -> bool:
        """One marker of a partition led here; False: try again."""
        try:
            await self._participants.write_marker(
                part.stream_id, marked.producer_id, marked.producer_epoch, marked.commit, part.start
            )
        except StreamError as exc:
            # A deleted topic needs no marker; anything else is retried by the next attempt (in a
            # cluster: the retry goes to the partition's new leader).
            log.warning(
                "transaction %s: no marker in %s-%d: %s",
                marked.transactional_id,
                part.topic,
                part.partition,
                exc,
            )
            return not self._broker.clustered
        return True
