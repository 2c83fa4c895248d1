"""The KIP-932 share-group APIs, version-free: ShareGroupHeartbeat (76), ShareFetch (78),
ShareAcknowledge (79), DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92) (ShareGroupDescribe, 77, asks as ConsumerGroupDescribe does:
:class:`~tabletopic.broker.protocol.messages.consumer_groups.GroupsDescription`).

kio's class of every served version satisfies these Protocols as it is (mypy checks each at the
end of this module).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

# api key -> the versions served (protocol/versions.py), each checked by mypy below.
SERVED_VERSIONS: dict[int, range] = {
    76: range(1, 2),  # ShareGroupHeartbeat
    77: range(1, 2),  # ShareGroupDescribe
    78: range(1, 2),  # ShareFetch
    79: range(1, 2),  # ShareAcknowledge
    90: range(0, 2),  # DescribeShareGroupOffsets
    91: range(0, 1),  # AlterShareGroupOffsets
    92: range(0, 1),  # DeleteShareGroupOffsets
}


class ShareGroupHeartbeatRequest(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def member_id(self) -> str: ...

    @property
    def member_epoch(self) -> int: ...

    @property
    def rack_id(self) -> str | None: ...

    @property
    def subscribed_topic_names(self) -> Sequence[str] | None: ...


class AcknowledgementBatch(Protocol):
    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def acknowledge_types(self) -> Sequence[int]: ...


class AcknowledgedPartition(Protocol):
    @property
    def partition_index(self) -> int: ...

    @property
    def acknowledgement_batches(self) -> Sequence[AcknowledgementBatch]: ...


class AcknowledgedTopic(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...

    @property
    def partitions(self) -> Sequence[AcknowledgedPartition]: ...


class ShareSessionRequest(Protocol):
    """ShareFetch and ShareAcknowledge: the member's share session and the records it acknowledges."""

    @property
    def group_id(self) -> str | None: ...

    @property
    def member_id(self) -> str | None: ...

    @property
    def share_session_epoch(self) -> int: ...

    @property
    def topics(self) -> Sequence[AcknowledgedTopic]: ...


class ForgottenTopic(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...

    @property
    def partitions(self) -> Sequence[int]: ...


class ShareFetchRequest(ShareSessionRequest, Protocol):
    @property
    def max_wait(self) -> timedelta: ...

    @property
    def max_records(self) -> int: ...

    @property
    def forgotten_topics_data(self) -> Sequence[ForgottenTopic]: ...


class ShareAcknowledgeRequest(ShareSessionRequest, Protocol):
    pass


class DescribedShareTopic(Protocol):
    @property
    def topic_name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[int]: ...


class DescribedShareGroup(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def topics(self) -> Sequence[DescribedShareTopic] | None: ...


class DescribeShareGroupOffsetsRequest(Protocol):
    @property
    def groups(self) -> Sequence[DescribedShareGroup]: ...


class ShareStartOffset(Protocol):
    @property
    def partition_index(self) -> int: ...

    @property
    def start_offset(self) -> int: ...


class AlteredShareTopic(Protocol):
    @property
    def topic_name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[ShareStartOffset]: ...


class AlterShareGroupOffsetsRequest(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def topics(self) -> Sequence[AlteredShareTopic]: ...


class DeletedShareTopic(Protocol):
    @property
    def topic_name(self) -> str: ...


class DeleteShareGroupOffsetsRequest(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def topics(self) -> Sequence[DeletedShareTopic]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.alter_share_group_offsets.v0.request import AlterShareGroupOffsetsRequest as Alter0
    from kio.schema.delete_share_group_offsets.v0.request import DeleteShareGroupOffsetsRequest as Delete0
    from kio.schema.describe_share_group_offsets.v0.request import (
        DescribeShareGroupOffsetsRequest as DescribeOffsets0,
    )
    from kio.schema.describe_share_group_offsets.v1.request import (
        DescribeShareGroupOffsetsRequest as DescribeOffsets1,
    )
    from kio.schema.share_acknowledge.v1.request import ShareAcknowledgeRequest as Acknowledge1
    from kio.schema.share_fetch.v1.request import ShareFetchRequest as Fetch1
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest as Describe1
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest as Heartbeat1

    from tabletopic.broker.protocol.messages.consumer_groups import GroupsDescription

    def _heartbeat(request: Heartbeat1) -> ShareGroupHeartbeatRequest:
        return request

    def _describe(request: Describe1) -> GroupsDescription:
        return request

    def _fetch(request: Fetch1) -> ShareFetchRequest:
        return request

    def _acknowledge(request: Acknowledge1) -> ShareAcknowledgeRequest:
        return request

    def _describe_offsets(request: DescribeOffsets0 | DescribeOffsets1) -> DescribeShareGroupOffsetsRequest:
        return request

    def _alter_offsets(request: Alter0) -> AlterShareGroupOffsetsRequest:
        return request

    def _delete_offsets(request: Delete0) -> DeleteShareGroupOffsetsRequest:
        return request
