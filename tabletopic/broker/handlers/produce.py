"""Produce (0): maps a request to partition-log appends and their results back to the response.

What an append checks and how (validation, idempotent sequences, the ordering of one connection's
appends, transactions) is the partition log's (:mod:`tabletopic.broker.partition_log`). The
handler starts the appends in request order, awaiting nothing before it has started them all, so
the appends of one connection reach each partition in the order their requests arrived.

A produce outlives its connection: when the client's connection drops, the server lets the request
finish, and the appends already started are shielded from any cancellation of the handler besides;
they record their offsets, so the producer's
retry on a new connection is answered as a duplicate with the original offset, as Kafka answers it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import node_endpoints
from tabletopic.broker.partition_log import AppendResult
from tabletopic.broker.protocol.messages.produce import ProduceRequest
from tabletopic.broker.protocol.responses import PartitionProduceResponse, ProduceResponse

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(
    broker: BrokerService, ctx: RequestContext, request: ProduceRequest
) -> ProduceResponse | None:
    acks = request.acks
    if acks not in (0, 1, -1):
        return _all_failed(request, ErrorCode.invalid_required_acks, f"acks={acks} is not 0, 1 or -1")
    transactional_id = request.transactional_id
    router = broker.zone_router
    zone = None if router is None else router.zone_of(ctx)
    log = broker.partition_log
    jobs: list[Awaitable[AppendResult]] = []
    shape: list[tuple[str, int]] = []
    for topic_data in request.topic_data:
        for partition in topic_data.partition_data:
            name: str = topic_data.name
            index: int = partition.index
            records = partition.records
            if router is not None:
                router.count(zone, len(records or b""), "in")
            if (
                router is not None
                and records
                and not transactional_id
                and router.serves_here(zone)
                and broker.topics.get(name) is not None
                and not broker.leadership.leads(name, index)
            ):
                # A client of this broker's zone, routed here: the data reaches the leader through
                # object storage, never over a cross-zone socket.
                jobs.append(router.handoff(name, index, bytes(records)))
            else:
                jobs.append(log.append(name, index, records, transactional_id))
            shape.append((name, index))
    # gather wraps every coroutine in a task right now, in order; shielded so a cancelled handler
    # does not cancel appends under way: see the module docstring.
    appends = asyncio.gather(*jobs)
    appends.add_done_callback(_retrieve)
    results = await asyncio.shield(appends)
    if acks == 0:
        return None
    # A client of a zone is sent to its zone's brokers by Metadata, never to a leader elsewhere.
    name_leaders = zone is None
    responses: dict[str, list[PartitionProduceResponse]] = {}
    for (name, index), result in zip(shape, results, strict=True):
        responses.setdefault(name, []).append(result.response(index, name_leaders))
    answer: ProduceResponse = {
        "responses": [{"name": name, "partition_responses": parts} for name, parts in responses.items()],
        "throttle_time": 0,
    }
    leaders = {result.leader[0] for result in results if result.leader is not None}
    if name_leaders and leaders:
        answer["node_endpoints"] = node_endpoints(broker, ctx, leaders)
    return answer


def _retrieve(appends: asyncio.Future[Any]) -> None:
    """Mark the outcome of appends whose connection went away as seen (nobody awaits them)."""
    if not appends.cancelled():
        appends.exception()


def _all_failed(request: ProduceRequest, code: ErrorCode, message: str) -> ProduceResponse:
    failed = AppendResult.failed(code, message)
    return {
        "responses": [
            {"name": t.name, "partition_responses": [failed.response(p.index) for p in t.partition_data]}
            for t in request.topic_data
        ],
        "throttle_time": 0,
    }
