"""Small helpers shared by handler modules."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.convert import read_message
from tabletopic.broker.protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
from tabletopic.broker.protocol.responses import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    NodeEndpoint,
)
from tabletopic.broker.topics import Topic

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger("tabletopic.broker.handlers")

RequestT = TypeVar("RequestT")

ZERO_UUID = uuid.UUID(int=0)


def typed(
    handler: Callable[[Any, RequestContext, RequestT], Awaitable[Any]], request_type: type[RequestT]
) -> Callable[[Any, RequestContext, Any], Awaitable[Any]]:
    """The dispatch-table entry of an API whose request type is read from kio's object of whatever
    version (:mod:`tabletopic.broker.protocol.messages`); its response is a TypedDict already."""

    async def handle(state: Any, ctx: RequestContext, request: object) -> Any:
        return await handler(state, ctx, read_message(request_type, request))

    # The handler's names, and ``__wrapped__`` for inspect.unwrap; not its annotations.
    return functools.update_wrapper(handle, handler, assigned=("__module__", "__name__", "__qualname__"))


# KIP-588 brought PRODUCER_FENCED (90) to the transaction APIs at these versions; a client on an
# older version does not know the code, and Kafka answers it INVALID_PRODUCER_EPOCH (47) instead,
# which such clients already treat as fenced (KafkaApis does the same per API). TxnOffsetCommit
# never gained the code in any version (its schema lists no such bump): 47 at every version.
_PRODUCER_FENCED_SINCE: dict[int, int | None] = {
    22: 4,  # InitProducerId
    24: 2,  # AddPartitionsToTxn
    25: 2,  # AddOffsetsToTxn
    26: 2,  # EndTxn
    28: None,  # TxnOffsetCommit
}


def txn_error(code: ErrorCode, api_key: int, api_version: int) -> ErrorCode:
    """A transaction API's error code as the client's version can read it."""
    if code is ErrorCode.producer_fenced and api_key in _PRODUCER_FENCED_SINCE:
        since = _PRODUCER_FENCED_SINCE[api_key]
        if since is None or api_version < since:
            return ErrorCode.invalid_producer_epoch
    return code


class ErrorFields(TypedDict):
    """The two fields most results share, to be unpacked into a response struct's dict."""

    error_code: ErrorCode
    error_message: str | None


def error_fields(code: ErrorCode, message: str | None = None) -> ErrorFields:
    return {"error_code": code, "error_message": message}


def topic_with_partition(broker: BrokerService, name: str, index: int) -> Topic | None:
    """The topic ``name`` if it exists and has partition ``index``, else None."""
    topic = broker.topics.get(name)
    return topic if topic is not None and 0 <= index < topic.partition_count else None


NO_LEADER_EPOCH = -1  # a request's current_leader_epoch when the client does not name one


def node_endpoints(
    broker: BrokerService, ctx: RequestContext, node_ids: Collection[int]
) -> list[NodeEndpoint]:
    """KIP-951's NodeEndpoints: where the brokers an answer names as leaders listen, on the
    client's listener, so that a client can go to a leader it has no address for yet."""
    return [
        {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
        for b in broker.leadership.brokers(ctx.listener)
        if b.node_id in node_ids
    ]


def leader_epoch_error(requested: int, serving: int) -> ErrorCode | None:
    """Kafka's check of the leader epoch a client names (KIP-320) against the one this broker
    serves with: an older one means the client's metadata is stale (FENCED_LEADER_EPOCH: it
    refreshes and retries); a newer one means this broker has not caught up with the leader change
    yet (UNKNOWN_LEADER_EPOCH: the client retries). None when the request may proceed."""
    if requested in (NO_LEADER_EPOCH, serving):
        return None
    return ErrorCode.fenced_leader_epoch if requested < serving else ErrorCode.unknown_leader_epoch


def not_served(broker: BrokerService, name: str, index: int, current_leader_epoch: int) -> ErrorCode | None:
    """Why this broker cannot answer a partition-level request that names the leader epoch the
    client knows (ListOffsets, OffsetForLeaderEpoch): it does not lead the partition, or the
    epoch is stale or ahead (:func:`leader_epoch_error`). None when it can."""
    serving = broker.leadership.serving_epoch(name, index)
    if serving is None:
        return ErrorCode.not_leader_or_follower
    return leader_epoch_error(current_leader_epoch, serving)


def unknown_partition(name: str, index: int) -> ErrorFields:
    """The error fields of a partition entry whose topic or partition does not exist."""
    return error_fields(ErrorCode.unknown_topic_or_partition, f"{name}-{index} does not exist")


async def partitions_response(
    broker: BrokerService,
    request: DeleteRecordsRequest,
    answer: Callable[[BrokerService, str, DeleteRecordsPartition], Awaitable[DeleteRecordsPartitionResult]],
) -> DeleteRecordsResponse:
    """The response of an API that answers each requested ``topics[].partitions[]`` entry on its
    own (DeleteRecords): ``answer(broker, topic name, partition entry)``, in order."""
    return {
        "throttle_time": 0,
        "topics": [
            {"name": t.name, "partitions": [await answer(broker, t.name, p) for p in t.partitions]}
            for t in request.topics
        ],
    }
