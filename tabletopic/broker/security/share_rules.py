"""ACL rules of the KIP-932 share group APIs, as Kafka checks them: READ on the group for
ShareGroupHeartbeat, ShareFetch and ShareAcknowledge (with DESCRIBE on each subscribed topic for
the heartbeat and READ on each fetched or acknowledged topic), DESCRIBE on the group for
DescribeShareGroupOffsets (ShareGroupDescribe has ConsumerGroupDescribe's rule), READ on the group
to alter its offsets and DELETE to delete them. A denied topic of a fetch or acknowledgement is
answered per partition with TOPIC_AUTHORIZATION_FAILED while the rest of the request proceeds."""

from __future__ import annotations

from typing import Protocol

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.answers import NO_LEADER, current_leader
from tabletopic.broker.protocol.messages.share_groups import (
    DescribeShareGroupOffsetsRequest,
    ShareGroupHeartbeatRequest,
    ShareSessionRequest,
)
from tabletopic.broker.security.acl import Operation
from tabletopic.broker.security.guard import Call, Check, Response, Rule, narrowed

TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed


class ShareGroupOffsetsChange(Protocol):
    """What the rule of AlterShareGroupOffsets and DeleteShareGroupOffsets reads: the group."""

    @property
    def group_id(self) -> str: ...


async def share_group_heartbeat(
    check: Check, ctx: RequestContext, request: ShareGroupHeartbeatRequest, call: Call
) -> Response:
    refusal = {"throttle_time": 0, "member_epoch": -1, "heartbeat_interval": 0}
    if not check.group(Operation.READ, request.group_id):
        return {**refusal, "error_code": GROUP_DENIED}
    names = request.subscribed_topic_names or ()
    if any(not check.topic(Operation.DESCRIBE, str(name)) for name in names):
        return {
            **refusal,
            "error_code": TOPIC_DENIED,
            "error_message": "a subscribed topic is not authorized",
        }
    return await call(request)


async def share_records(
    check: Check, ctx: RequestContext, request: ShareSessionRequest, call: Call
) -> Response:
    """ShareFetch and ShareAcknowledge: the group, then each topic (by id)."""
    if not check.group(Operation.READ, request.group_id or ""):
        return {"throttle_time": 0, "error_code": GROUP_DENIED, "responses": [], "node_endpoints": []}
    passed, refused = [], []
    for topic in request.topics:
        known = check.broker.topics.by_id(topic.topic_id) if topic.topic_id is not None else None
        if known is None or check.topic(Operation.READ, known.name):
            passed.append(topic)
        else:
            partitions = [
                {
                    "partition_index": p.partition_index,
                    "error_code": TOPIC_DENIED,
                    "current_leader": current_leader(NO_LEADER),
                }
                for p in topic.partitions
            ]
            refused.append({"topic_id": topic.topic_id, "partitions": partitions})
    response = await call(narrowed(request, topics=tuple(passed)) if refused else request)
    if refused and isinstance(response, dict):
        response = {**response, "responses": [*response.get("responses", []), *refused]}
    return response


async def describe_share_group_offsets(
    check: Check, ctx: RequestContext, request: DescribeShareGroupOffsetsRequest, call: Call
) -> Response:
    passed = tuple(g for g in request.groups if check.group(Operation.DESCRIBE, g.group_id))
    refused = [
        {"group_id": g.group_id, "topics": [], "error_code": GROUP_DENIED}
        for g in request.groups
        if g not in passed
    ]
    if not passed:
        return {"throttle_time": 0, "groups": refused}
    response = await call(narrowed(request, groups=passed))
    if not isinstance(response, dict):
        return response
    return {**response, "groups": [*response.get("groups", []), *refused]}


def share_offsets_change(operation: Operation) -> Rule:
    """AlterShareGroupOffsets (READ) and DeleteShareGroupOffsets (DELETE): all or nothing."""

    async def rule(
        check: Check, ctx: RequestContext, request: ShareGroupOffsetsChange, call: Call
    ) -> Response:
        if check.group(operation, request.group_id):
            return await call(request)
        return {"throttle_time": 0, "error_code": GROUP_DENIED, "responses": []}

    return rule
