"""The KIP-932 share-group APIs: ShareGroupHeartbeat (76), ShareFetch (78) and ShareAcknowledge (79),
each served v1; DescribeShareGroupOffsets (90, v0 to v1), AlterShareGroupOffsets (91, v0) and
DeleteShareGroupOffsets (92, v0). ShareGroupDescribe (77, v1) asks as ConsumerGroupDescribe does:
:data:`~tabletopic.broker.protocol.messages.consumer_groups.GroupsDescription`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.alter_share_group_offsets.v0 import request as alter_v0
    from kio.schema.delete_share_group_offsets.v0 import request as delete_v0
    from kio.schema.describe_share_group_offsets.v0 import request as describe_v0
    from kio.schema.describe_share_group_offsets.v1 import request as describe_v1
    from kio.schema.share_acknowledge.v1 import request as acknowledge_v1
    from kio.schema.share_fetch.v1 import request as fetch_v1
    from kio.schema.share_group_heartbeat.v1 import request as heartbeat_v1

ShareGroupHeartbeatRequest: TypeAlias = "heartbeat_v1.ShareGroupHeartbeatRequest"
ShareFetchRequest: TypeAlias = "fetch_v1.ShareFetchRequest"
ShareAcknowledgeRequest: TypeAlias = "acknowledge_v1.ShareAcknowledgeRequest"
ShareSessionRequest: TypeAlias = "ShareFetchRequest | ShareAcknowledgeRequest"
"""ShareFetch and ShareAcknowledge: the member's share session and the records it acknowledges."""
AcknowledgedTopic: TypeAlias = "fetch_v1.FetchTopic | acknowledge_v1.AcknowledgeTopic"
DescribeShareGroupOffsetsRequest: TypeAlias = (
    "describe_v0.DescribeShareGroupOffsetsRequest | describe_v1.DescribeShareGroupOffsetsRequest"
)
AlterShareGroupOffsetsRequest: TypeAlias = "alter_v0.AlterShareGroupOffsetsRequest"
DeleteShareGroupOffsetsRequest: TypeAlias = "delete_v0.DeleteShareGroupOffsetsRequest"
