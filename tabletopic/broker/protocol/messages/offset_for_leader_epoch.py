"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, asked for per partition (served v2 to
v4). A partition names the epoch whose end offset is asked for (``leader_epoch``) and the epoch the
client knows the leader by (``current_leader_epoch``, KIP-320; -1 for none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.offset_for_leader_epoch.v2 import request as v2
    from kio.schema.offset_for_leader_epoch.v3 import request as v3
    from kio.schema.offset_for_leader_epoch.v4 import request as v4

OffsetForLeaderEpochRequest: TypeAlias = (
    "v2.OffsetForLeaderEpochRequest | v3.OffsetForLeaderEpochRequest | v4.OffsetForLeaderEpochRequest"
)
OffsetForLeaderPartition: TypeAlias = (
    "v2.OffsetForLeaderPartition | v3.OffsetForLeaderPartition | v4.OffsetForLeaderPartition"
)
