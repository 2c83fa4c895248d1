"""ShareGroupDescribe (77): members, epochs and assignments of KIP-932 share groups. A group id
that is not a share group is GROUP_ID_NOT_FOUND, as in Kafka."""

from __future__ import annotations

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.share_group import SHARE_ASSIGNOR, ShareGroup
from tabletopic.broker.handlers.consumer_group_describe import GroupHeader, _assignment, describe_groups
from tabletopic.broker.protocol.messages.consumer_groups import GroupsDescription
from tabletopic.broker.protocol.responses import ShareGroupDescribeDescribedGroup, ShareGroupDescribeResponse


async def handle(
    coordinator: GroupCoordinator, ctx: RequestContext, request: GroupsDescription
) -> ShareGroupDescribeResponse:
    topics = coordinator.consumer.topics()

    def fields(header: GroupHeader, group: ShareGroup | None) -> ShareGroupDescribeDescribedGroup:
        if group is None:
            return {**header, "assignor_name": "", "members": []}
        return {
            **header,
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
        }

    groups = describe_groups(coordinator, request, coordinator.share.group, "share", fields)
    return {"throttle_time": 0, "groups": groups}
