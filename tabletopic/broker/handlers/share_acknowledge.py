"""ShareAcknowledge (79): acknowledgements of a share group member outside a fetch (KIP-932), in
its share session (which this request cannot open: epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1
closes the session once the acknowledgements are applied, releasing what the member still holds).
The answer comes after the new share-partition state was written."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.share_coordinator import CLOSE_SESSION_EPOCH, OPEN_SESSION_EPOCH
from tabletopic.broker.handlers.share_fetch import (
    PartitionAnswer,
    apply_acks,
    encode_answer,
    read_acks,
    requester,
    top_error,
)
from tabletopic.broker.protocol.messages.share_groups import ShareAcknowledgeRequest

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(
    broker: BrokerService, ctx: RequestContext, request: ShareAcknowledgeRequest
) -> dict[str, Any]:
    identified = requester(broker, request)
    if isinstance(identified, dict):
        return identified
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
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "responses": encode_answer(broker, answers, unknown, with_records=False),
        "node_endpoints": [],
    }
