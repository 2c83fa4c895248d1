"""ShareGroupDescribe (77): members, epochs and assignments of KIP-932 share groups. A group id
that is not a share group is GROUP_ID_NOT_FOUND, as in Kafka."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.share_group import SHARE_ASSIGNOR
from tabletopic.broker.handlers.consumer_group_describe import _assignment, _empty
from tabletopic.broker.handlers.describe_groups import _GROUP_OPERATIONS, _OPERATIONS_OMITTED


async def handle(coordinator: GroupCoordinator, ctx: RequestContext, request: Any) -> dict[str, Any]:
    topics = coordinator.consumer.topics()
    operations = _GROUP_OPERATIONS if request.include_authorized_operations else _OPERATIONS_OMITTED
    described = []
    for group_id in request.group_ids:
        refused = coordinator.consumer.refusal(group_id)
        group = coordinator.share.group(group_id)
        if refused is not None:
            described.append(_empty(group_id, refused, None))
        elif group is None:
            described.append(
                _empty(group_id, ErrorCode.group_id_not_found, f"group {group_id} is not a share group")
            )
        else:
            described.append(
                {
                    "error_code": ErrorCode.none,
                    "error_message": None,
                    "group_id": group_id,
                    "group_state": group.state,
                    "group_epoch": group.group_epoch,
                    "assignment_epoch": group.assignment_epoch,
                    "assignor_name": SHARE_ASSIGNOR,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.member_epoch,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "subscribed_topic_names": list(m.subscribed_topic_names),
                            "assignment": _assignment(m.assigned, topics),
                        }
                        for m in group.members.values()
                    ],
                    "authorized_operations": operations,
                }
            )
    return {"throttle_time": 0, "groups": described}
