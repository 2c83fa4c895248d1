"""InitProducerId (22): producer ids for idempotent producers, and for transactional producers the
transactional id's producer id with a bumped epoch (fencing any older producer of that id; see
:mod:`tabletopic.broker.transactions.coordinator`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import txn_error
from tabletopic.broker.protocol.messages.init_producer_id import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
)
from tabletopic.broker.protocol.responses import InitProducerIdResponse
from tabletopic.broker.transactions.participants import TxnError

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)

MAX_EPOCH = 32767


def _answer(
    code: ErrorCode, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH
) -> InitProducerIdResponse:
    return {"throttle_time": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": epoch}


async def handle(
    broker: BrokerService, ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    producer_id = request.producer_id
    epoch = request.producer_epoch
    if request.transactional_id:
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        try:
            pid, new_epoch = await broker.transactions.init_producer_id(
                request.transactional_id, timeout_ms, producer_id, epoch
            )
        except TxnError as exc:
            log.info("InitProducerId %r refused: %s", request.transactional_id, exc)
            return _answer(txn_error(exc.code, ctx.api_key, ctx.api_version))
        return _answer(ErrorCode.none, pid, new_epoch)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        # KIP-360: an existing producer asks for a bumped epoch to reset its sequences.
        return _answer(ErrorCode.none, producer_id, epoch + 1)
    return _answer(ErrorCode.none, await broker.allocate_producer_id(), 0)
