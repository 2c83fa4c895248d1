"""ShareAcknowledge (79): acknowledgements of a share group member outside a fetch (KIP-932), in
its share session (which this request cannot open: epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1
closes the session once the acknowledgements are applied, releasing what the member still holds).
The answer comes after the new share-partition state was written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.share_coordinator import CLOSE_SESSION_EPOCH, OPEN_SESSION_EPOCH
from tabletopic.broker.handlers.share_fetch import (
    PartitionAnswer,
    apply_acks,
    group_by_topic,
    name_leaders,
    read_acks,
    requester,
)
from tabletopic.broker.protocol.answers import NO_LEADER, current_leader
from tabletopic.broker.protocol.messages.share_groups import ShareAcknowledgeRequest
from tabletopic.broker.protocol.responses import (
    ShareAcknowledgePartitionData,
    ShareAcknowledgeResponse,
)

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


def _entry(index: int, answer: PartitionAnswer) -> ShareAcknowledgePartitionData:
    return {
        "partition_index": index,
        "error_code": answer.error if answer.ack_error is None else answer.ack_error,
        "current_leader": current_leader(answer.leader),
    }


def _unknown_entry(index: int, error: ErrorCode) -> ShareAcknowledgePartitionData:
    return {"partition_index": index, "error_code": error, "current_leader": current_leader(NO_LEADER)}


def top_error(error_code: ErrorCode, error_message: str | None = None) -> ShareAcknowledgeResponse:
    """A ShareAcknowledge answer refused as a whole (the response builder leaves the other fields
    zero or empty)."""
    return {"error_code": error_code, "error_message": error_message}


async def handle(
    broker: BrokerService, ctx: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    identified = requester(broker, request)
    if not isinstance(identified, tuple):
        return top_error(**identified)
    shares, group_id, member_id, epoch = identified
    if epoch == OPEN_SESSION_EPOCH:
        return top_error(
            ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session"
        )
    acks, unknown = read_acks(broker, request.topics)
    error, session = shares.session(group_id, member_id, epoch)
    if error is not ErrorCode.none or session is None:
        return top_error(error)
    errors = await apply_acks(broker, shares, group_id, member_id, acks)
    if epoch == CLOSE_SESSION_EPOCH:
        shares.close_session(group_id, member_id)
    answers = {tp: PartitionAnswer(ack_error=e) for tp, e in errors.items()}
    endpoints = name_leaders(broker, ctx, answers)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "responses": group_by_topic(broker, answers, unknown, _entry, _unknown_entry),
        "node_endpoints": endpoints,
    }
