"""DescribeGroups (15): members, their metadata and assignments, of each named group.

An unknown group is described as a Dead group before v6 and answered GROUP_ID_NOT_FOUND from v6 on
(KIP-1043).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.consumer_group import ConsumerGroup
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.model import GroupDescription, GroupState
from tabletopic.broker.groups.share_group import SHARE_ASSIGNOR, ShareGroup, ShareMember
from tabletopic.broker.protocol.messages.groups import DescribeGroupsRequest
from tabletopic.broker.protocol.responses import DescribeGroupsDescribedGroup, DescribeGroupsResponse

# "Authorized operations not computed" (INT32_MIN), what Kafka sends when not asked.
_OPERATIONS_OMITTED = -(2**31)
# Without ACLs every principal may do everything a group supports: READ (3), DELETE (6), DESCRIBE (8),
# as bits of Kafka's AclOperation codes.
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def _described(description: GroupDescription, operations: int) -> DescribeGroupsDescribedGroup:
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_id": description.group_id,
        "group_state": description.state.value,
        "protocol_type": description.protocol_type,
        "protocol_data": description.protocol_name,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in description.members
        ],
        "authorized_operations": operations,
    }


def _not_described(group_id: str, error: ErrorCode, message: str | None) -> DescribeGroupsDescribedGroup:
    return {
        "error_code": error,
        "error_message": message,
        "group_id": group_id,
        "group_state": GroupState.DEAD.value,
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": _OPERATIONS_OMITTED,
    }


def _consumer_described(group: ConsumerGroup | ShareGroup, operations: int) -> DescribeGroupsDescribedGroup:
    """A KIP-848 or KIP-932 group as classic clients see it: type "consumer" or "share", its members
    without the classic protocol's metadata and assignment bytes (ConsumerGroupDescribe and
    ShareGroupDescribe have those)."""
    share = isinstance(group, ShareGroup)
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": "share" if share else "consumer",
        "protocol_data": SHARE_ASSIGNOR if isinstance(group, ShareGroup) else group.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": None if isinstance(m, ShareMember) else m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": b"",
                "member_assignment": b"",
            }
            for m in group.members.values()
        ],
        "authorized_operations": operations,
    }


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    operations = _GROUP_OPERATIONS if request.include_authorized_operations else _OPERATIONS_OMITTED
    groups: list[DescribeGroupsDescribedGroup] = []
    for group_id in request.groups:
        description = coordinator.describe_group(group_id)
        consumer = coordinator.consumer.group(group_id)
        share = coordinator.share.group(group_id)
        if coordinator.ready and consumer is not None and consumer.members:
            groups.append(_consumer_described(consumer, operations))
        elif coordinator.ready and share is not None:
            groups.append(_consumer_described(share, operations))
        elif not coordinator.ready:
            groups.append(_not_described(group_id, ErrorCode.coordinator_load_in_progress, None))
        elif description is None and ctx.api_version >= 6:
            groups.append(
                _not_described(group_id, ErrorCode.group_id_not_found, f"group {group_id} not found")
            )
        elif description is None:
            groups.append(_not_described(group_id, ErrorCode.none, None))
        else:
            groups.append(_described(description, operations))
    return {"throttle_time": 0, "groups": groups}
