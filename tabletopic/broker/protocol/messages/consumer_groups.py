"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), version-free: KIP-848 consumer
groups (ShareGroupDescribe asks as ConsumerGroupDescribe does: :class:`GroupsDescription`).

kio's class of every served version satisfies these Protocols as it is (mypy checks each at the
end of this module); ``subscribed_topic_regex`` (v1 on) is read by :func:`subscribed_topic_regex`,
which takes the version.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, cast

# api key -> the versions served (protocol/versions.py: GROUP_MAX_VERSIONS), each checked by mypy.
SERVED_VERSIONS: dict[int, range] = {
    68: range(0, 2),  # ConsumerGroupHeartbeat
    69: range(0, 2),  # ConsumerGroupDescribe
}
TOPIC_REGEX_SINCE = 1  # ConsumerGroupHeartbeat names a subscription by regular expression from v1


class OwnedTopicPartitions(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...

    @property
    def partitions(self) -> Sequence[int]: ...


class ConsumerGroupHeartbeatRequest(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def member_id(self) -> str: ...

    @property
    def member_epoch(self) -> int: ...

    @property
    def instance_id(self) -> str | None: ...

    @property
    def rack_id(self) -> str | None: ...

    @property
    def rebalance_timeout(self) -> timedelta: ...

    @property
    def subscribed_topic_names(self) -> Sequence[str] | None: ...

    @property
    def server_assignor(self) -> str | None: ...

    @property
    def topic_partitions(self) -> Sequence[OwnedTopicPartitions] | None: ...


class RegexConsumerGroupHeartbeatRequest(ConsumerGroupHeartbeatRequest, Protocol):
    """A ConsumerGroupHeartbeat of v1 on, which may subscribe by regular expression."""

    @property
    def subscribed_topic_regex(self) -> str | None: ...


def subscribed_topic_regex(request: ConsumerGroupHeartbeatRequest, version: int) -> str | None:
    """The subscription's regular expression, None for a version that cannot name one."""
    if version < TOPIC_REGEX_SINCE:
        return None
    return cast(RegexConsumerGroupHeartbeatRequest, request).subscribed_topic_regex


class GroupsDescription(Protocol):
    """ConsumerGroupDescribe and ShareGroupDescribe: the groups to describe."""

    @property
    def group_ids(self) -> Sequence[str]: ...

    @property
    def include_authorized_operations(self) -> bool: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest as Describe0
    from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest as Describe1
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest as Heartbeat0
    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest as Heartbeat1

    def _heartbeat(request: Heartbeat0 | Heartbeat1) -> ConsumerGroupHeartbeatRequest:
        return request

    def _from_v1_a_regex(request: Heartbeat1) -> RegexConsumerGroupHeartbeatRequest:
        return request

    def _describe(request: Describe0 | Describe1) -> GroupsDescription:
        return request
