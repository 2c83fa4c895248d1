"""The transaction APIs a producer sends to its transaction coordinator: AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26) and TxnOffsetCommit (28); and the admin views
DescribeTransactions (65) and ListTransactions (66). The state machine is
:class:`~tabletopic.broker.transactions.coordinator.TransactionCoordinator`; these only translate."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import txn_error
from tabletopic.broker.protocol.messages.transactions import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    ListTransactionsRequest,
    TxnOffsetCommitRequest,
)
from tabletopic.broker.protocol.responses import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    DescribeTransactionsResponse,
    DescribeTransactionsTransactionState,
    EndTxnResponse,
    ListTransactionsResponse,
    ListTransactionsTransactionState,
    TxnOffsetCommitResponse,
)
from tabletopic.broker.transactions.model import TxnOffsets
from tabletopic.broker.transactions.participants import TxnError
from tabletopic.broker.transactions.store import STATES, PendingOffset

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)


async def add_partitions(
    broker: BrokerService, ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    """v0-3: one transaction per request (v4+ is the brokers' batched form, not advertised)."""
    wanted = [(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]
    try:
        results = await broker.transactions.add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            wanted,
        )
    except TxnError as exc:
        log.info("AddPartitionsToTxn %r refused: %s", request.v3_and_below_transactional_id, exc)
        results = dict.fromkeys(wanted, exc.code)
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), code in results.items():
        code = txn_error(code, ctx.api_key, ctx.api_version)
        by_topic.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": code})
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "results_by_transaction": [],
        "results_by_topic_v3_and_below": [
            {"name": name, "results_by_partition": parts} for name, parts in by_topic.items()
        ],
    }


async def add_offsets(
    broker: BrokerService, ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    try:
        await broker.transactions.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
    except TxnError as exc:
        log.info("AddOffsetsToTxn %r refused: %s", request.transactional_id, exc)
        return {"throttle_time": 0, "error_code": txn_error(exc.code, ctx.api_key, ctx.api_version)}
    return {"throttle_time": 0, "error_code": ErrorCode.none}


def _end_txn_answer(code: ErrorCode) -> EndTxnResponse:
    """producer_id and producer_epoch (v5, transaction protocol 2) are -1: the broker never bumps
    the epoch at the end of a transaction."""
    return {"throttle_time": 0, "producer_id": -1, "producer_epoch": -1, "error_code": code}


async def end_txn(broker: BrokerService, ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    try:
        await broker.transactions.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed)
        )
    except TxnError as exc:
        log.info("EndTxn %r refused: %s", request.transactional_id, exc)
        return _end_txn_answer(txn_error(exc.code, ctx.api_key, ctx.api_version))
    return _end_txn_answer(ErrorCode.none)


async def txn_offset_commit(
    broker: BrokerService, ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    offsets = [
        PendingOffset(
            topic.name,
            int(p.partition_index),
            int(p.committed_offset),
            p.committed_leader_epoch,
            p.committed_metadata,
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    code = ErrorCode.none
    unknown = {(o.topic, o.partition) for o in offsets if not _exists(broker, o.topic, o.partition)}
    try:
        await broker.transactions.txn_offset_commit(
            TxnOffsets(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.group_id,
                tuple(o for o in offsets if (o.topic, o.partition) not in unknown),
                request.member_id,
                request.generation_id,
                request.group_instance_id,
            )
        )
    except TxnError as exc:
        log.info("TxnOffsetCommit %r refused: %s", request.transactional_id, exc)
        code = txn_error(exc.code, ctx.api_key, ctx.api_version)
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.unknown_topic_or_partition
                        if (topic.name, int(p.partition_index)) in unknown
                        else code,
                    }
                    for p in topic.partitions
                ],
            }
            for topic in request.topics
        ],
    }


def _exists(broker: BrokerService, topic_name: str, partition: int) -> bool:
    topic = broker.topics.get(topic_name)
    return topic is not None and 0 <= partition < topic.partition_count


async def describe(
    broker: BrokerService, ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    states: list[DescribeTransactionsTransactionState] = []
    for transactional_id in request.transactional_ids:
        txn = broker.transactions.describe(transactional_id)
        if txn is None:
            states.append(
                {
                    "error_code": ErrorCode.transactional_id_not_found,
                    "transactional_id": transactional_id,
                    "transaction_state": "",
                    "transaction_timeout": 0,
                    "transaction_start_time": 0,  # Kafka's default; -1 is no valid timestamp
                    "producer_id": -1,
                    "producer_epoch": -1,
                    "topics": [],
                }
            )
            continue
        topics: dict[str, list[int]] = {}
        for topic, partition in txn.partitions:
            topics.setdefault(topic, []).append(partition)
        states.append(
            {
                "error_code": ErrorCode.none,
                "transactional_id": transactional_id,
                "transaction_state": txn.state,
                "transaction_timeout": txn.timeout_ms,
                "transaction_start_time": txn.started_ms,
                "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch,
                "topics": [{"topic": t, "partitions": sorted(p)} for t, p in sorted(topics.items())],
            }
        )
    return {"throttle_time": 0, "transaction_states": states}


async def list_transactions(
    broker: BrokerService, ctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    state_filters = list(request.state_filters)
    producer_filters = {int(p) for p in request.producer_id_filters}
    unknown = [s for s in state_filters if s not in STATES]
    listed: list[ListTransactionsTransactionState] = [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "transaction_state": t.state}
        for t in broker.transactions.all()
        if (not state_filters or t.state in state_filters)
        and (not producer_filters or t.producer_id in producer_filters)
    ]
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "unknown_state_filters": unknown,
        "transaction_states": listed,
    }
