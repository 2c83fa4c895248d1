"""OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47), version-free: a group's committed
positions.

OffsetCommit's partitions name a leader epoch from v6 and its members an instance id from v7;
OffsetFetch asks for one group before v8 and for a batch from v8 (with the member's id and epoch
from v9, and ``require_stable`` from v7). Those two requests are frozen dataclasses read once from
kio's class of any version, a field a version lacks taking Kafka's default. OffsetDelete is kio's
class of its one version, and the ACL rule reads kio's OffsetFetch as it is
(:data:`OneGroupOffsetFetch` before v8, :data:`GroupsOffsetFetch` from v8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.offset_delete.v0 import request as delete_v0
    from kio.schema.offset_fetch.v1 import request as fetch_v1
    from kio.schema.offset_fetch.v2 import request as fetch_v2
    from kio.schema.offset_fetch.v3 import request as fetch_v3
    from kio.schema.offset_fetch.v4 import request as fetch_v4
    from kio.schema.offset_fetch.v5 import request as fetch_v5
    from kio.schema.offset_fetch.v6 import request as fetch_v6
    from kio.schema.offset_fetch.v7 import request as fetch_v7
    from kio.schema.offset_fetch.v8 import request as fetch_v8
    from kio.schema.offset_fetch.v9 import request as fetch_v9

NO_LEADER_EPOCH = -1  # a committed offset's leader epoch before OffsetCommit v6 (TxnOffsetCommit v2)
NO_MEMBER_EPOCH = -1  # an OffsetFetch without a member (before v9, or an admin tool)
BATCHED_FETCH_SINCE = 8  # OffsetFetch asks for a batch of groups from v8


@dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    committed_metadata: str | None
    committed_leader_epoch: int = NO_LEADER_EPOCH  # v6 on (TxnOffsetCommit: v2 on)


@dataclass(frozen=True, slots=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    topics: tuple[OffsetCommitTopic, ...]
    group_instance_id: str | None = None  # v7 on


@dataclass(frozen=True, slots=True)
class OffsetFetchTopic:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchGroup:
    """v8 on: one group of the batch."""

    group_id: str
    topics: tuple[OffsetFetchTopic, ...] | None  # null: every partition the group committed
    member_id: str | None = None  # v9 on
    member_epoch: int = NO_MEMBER_EPOCH  # v9 on


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str = ""  # v1 to v7
    topics: tuple[OffsetFetchTopic, ...] | None = None  # v1 to v7 (nullable from v2)
    groups: tuple[OffsetFetchGroup, ...] = ()  # v8 on
    require_stable: bool = False  # v7 on

    def group_ids(self) -> list[str]:
        """The groups asked for: the batch (v8 on), else the one group."""
        return [g.group_id for g in self.groups] if self.groups else [self.group_id]


OneGroupOffsetFetch: TypeAlias = (
    "fetch_v1.OffsetFetchRequest | fetch_v2.OffsetFetchRequest | fetch_v3.OffsetFetchRequest | "
    "fetch_v4.OffsetFetchRequest | fetch_v5.OffsetFetchRequest | fetch_v6.OffsetFetchRequest | "
    "fetch_v7.OffsetFetchRequest"
)
"""OffsetFetch v1 to v7 as the ACL rule reads kio's class: the one group."""
GroupsOffsetFetch: TypeAlias = "fetch_v8.OffsetFetchRequest | fetch_v9.OffsetFetchRequest"
"""OffsetFetch v8 on as the ACL rule reads kio's class: the batch of groups."""
OffsetDeleteRequest: TypeAlias = "delete_v0.OffsetDeleteRequest"
