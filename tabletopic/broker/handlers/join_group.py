"""JoinGroup (11): resolve the per-version differences of the request into a version-free
:class:`~tabletopic.broker.groups.model.JoinRequest` for the coordinator.

Before v7 the protocol name is not nullable, so an error answers "" instead of null.
"""

from __future__ import annotations

import datetime
import re

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.model import JoinRequest
from tabletopic.broker.protocol.messages.join_group import JoinGroupRequest
from tabletopic.broker.protocol.responses import JoinGroupResponse

_IPV4_WITH_PORT = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){3}):\d+$")


def _ms(value: datetime.timedelta) -> int:
    return int(value / datetime.timedelta(milliseconds=1))


def client_host(ctx: RequestContext) -> str:
    """Kafka reports hosts as InetAddress.toString() ("/127.0.0.1", no port); tools expect that form."""
    host = ctx.client_host or ""
    match = _IPV4_WITH_PORT.match(host)
    if match is not None:
        host = match.group(1)
    return host if host.startswith("/") else f"/{host}"


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: JoinGroupRequest
) -> JoinGroupResponse:
    version = ctx.api_version
    session_timeout_ms = _ms(request.session_timeout)
    # v0 has no rebalance timeout: Kafka uses the session timeout for both.
    rebalance = request.rebalance_timeout
    rebalance_timeout_ms = _ms(rebalance) if rebalance is not None else session_timeout_ms
    result = await coordinator.join_group(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
            reason=request.reason,
        )
    )
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # non-nullable before v7
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in result.members
        ],
    }
