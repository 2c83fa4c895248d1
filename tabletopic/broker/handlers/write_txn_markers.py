"""WriteTxnMarkers (27): a transaction coordinator on another broker asks this partition leader to
write a transaction's COMMIT or ABORT marker (cluster mode; on one node the coordinator writes its
own). The marker closes the transaction in the partition: last stable offset, aborted index."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.store import GroupFenced
from tabletopic.broker.leadership import GROUP_SLOTS_TOPIC
from tabletopic.broker.protocol.answers import write_txn_markers_answer
from tabletopic.broker.protocol.messages.write_txn_markers import WritableTxnMarker, WriteTxnMarkersRequest
from tabletopic.broker.protocol.responses import WriteTxnMarkersResponse
from tabletopic.s3stream.streams import StreamError, StreamFenced, StreamNotFound

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)


async def handle(
    broker: BrokerService, ctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    # Every marker at once: appended together, they share the next WAL write.
    jobs = [
        _write(broker, marker, topic.name, int(index))
        for marker in request.markers
        for topic in marker.topics
        for index in topic.partition_indexes
    ]
    return write_txn_markers_answer(request, iter(await asyncio.gather(*jobs)))


async def _write(broker: BrokerService, marker: WritableTxnMarker, name: str, index: int) -> ErrorCode:
    if not broker.clustered:
        # One node's coordinator writes its own markers; nobody else may.
        return ErrorCode.invalid_request
    if name == GROUP_SLOTS_TOPIC:
        return await _group_offsets(broker, marker, index)
    topic = broker.topics.get(name)
    if topic is None or not 0 <= index < topic.partition_count:
        return ErrorCode.unknown_topic_or_partition
    if not broker.leadership.leads(name, index):
        return ErrorCode.not_leader_or_follower
    txns = broker.transactions.participants  # the partition side of transactions
    producer_id, epoch = int(marker.producer_id), int(marker.coordinator_epoch)
    if not txns.accept_marker(producer_id, epoch):
        log.warning("marker for %s-%d from a deposed coordinator (epoch %d) refused", name, index, epoch)
        return ErrorCode.transaction_coordinator_fenced
    try:
        await txns.write_marker(
            topic.streams[index],
            producer_id,
            int(marker.producer_epoch),
            bool(marker.transaction_result),
            coordinator_epoch=epoch,
        )
    except StreamNotFound:
        return ErrorCode.not_leader_or_follower if broker.clustered else ErrorCode.unknown_topic_or_partition
    except StreamFenced:
        return ErrorCode.not_leader_or_follower
    except StreamError as exc:
        log.warning("marker for %s-%d not written: %s", name, index, exc)
        return ErrorCode.kafka_storage_error
    return ErrorCode.none


async def _group_offsets(broker: BrokerService, marker: WritableTxnMarker, slot: int) -> ErrorCode:
    """A transaction ended: commit (or drop) the offsets it gave the groups of this coordinator
    slot (TxnOffsetCommit keeps them in the database until then)."""
    leadership = broker.leadership
    if not leadership.leads(GROUP_SLOTS_TOPIC, slot):
        return ErrorCode.not_coordinator
    node_id = broker.node_id
    try:
        await broker.transactions.apply_pending_offsets(
            int(marker.producer_id),
            lambda group_id: leadership.group_coordinator(group_id) == node_id,
            bool(marker.transaction_result),
        )
    except GroupFenced:  # the slot moved meanwhile: the transaction's coordinator asks its new leader
        return ErrorCode.not_coordinator
    return ErrorCode.none
