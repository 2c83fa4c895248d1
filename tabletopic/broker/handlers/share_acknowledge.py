"""ShareAcknowledge (79): acknowledgements of a share group member outside a fetch (KIP-932), in
its share session (which this request cannot open: epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1
closes the session once the acknowledgements are applied, releasing what the member still holds).
The answer comes after the new share-partition state was written."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.share_coordinator import CLOSE_SESSION_EPOCH, OPEN_SESSION_EPOCH
from tabletopic.broker.handlers.share_fetch import PartitionAnswer, apply_acks, encode_answer, read_acks

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


def _top_error(error: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": error,
        "error_message": message,
        "responses": [],
        "node_endpoints": [],
    }


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any]:
    shares = broker.share_groups
    if shares is None:
        return _top_error(ErrorCode.coordinator_not_available)
    group_id, member_id = request.group_id or "", request.member_id or ""
    epoch = int(request.share_session_epoch)
    if not group_id or not member_id:
        return _top_error(ErrorCode.invalid_request, "a share acknowledgement names its group and member")
    if epoch == OPEN_SESSION_EPOCH:
        return _top_error(
            ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session"
        )
    acks, unknown = read_acks(broker, request.topics)
    error, session = shares.session(group_id, member_id, epoch)
    if error is not ErrorCode.none or session is None:
        return _top_error(error)
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
