"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): KIP-848 consumer groups (each served
v0 to v1; ShareGroupDescribe asks as ConsumerGroupDescribe does: :data:`GroupsDescription`).

``subscribed_topic_regex`` (v1 on) is read by :func:`subscribed_topic_regex`, which takes the
version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias, cast

if TYPE_CHECKING:
    from kio.schema.consumer_group_describe.v0 import request as describe_v0
    from kio.schema.consumer_group_describe.v1 import request as describe_v1
    from kio.schema.consumer_group_heartbeat.v0 import request as heartbeat_v0
    from kio.schema.consumer_group_heartbeat.v1 import request as heartbeat_v1
    from kio.schema.share_group_describe.v1 import request as share_describe_v1

TOPIC_REGEX_SINCE = 1  # ConsumerGroupHeartbeat names a subscription by regular expression from v1

ConsumerGroupHeartbeatRequest: TypeAlias = (
    "heartbeat_v0.ConsumerGroupHeartbeatRequest | heartbeat_v1.ConsumerGroupHeartbeatRequest"
)
RegexConsumerGroupHeartbeatRequest: TypeAlias = "heartbeat_v1.ConsumerGroupHeartbeatRequest"
"""A ConsumerGroupHeartbeat of v1 on, which may subscribe by regular expression."""
GroupsDescription: TypeAlias = (
    "describe_v0.ConsumerGroupDescribeRequest | describe_v1.ConsumerGroupDescribeRequest | "
    "share_describe_v1.ShareGroupDescribeRequest"
)
"""ConsumerGroupDescribe and ShareGroupDescribe: the groups to describe."""


def subscribed_topic_regex(request: ConsumerGroupHeartbeatRequest, version: int) -> str | None:
    """The subscription's regular expression, None for a version that cannot name one."""
    if version < TOPIC_REGEX_SINCE:
        return None
    return cast(RegexConsumerGroupHeartbeatRequest, request).subscribed_topic_regex
