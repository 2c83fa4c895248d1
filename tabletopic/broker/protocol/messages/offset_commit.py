"""OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47), version-free: a group's committed
positions.

OffsetCommit's partitions name a leader epoch from v6 and its members an instance id from v7;
OffsetFetch asks for one group before v8 and for a batch from v8 (with the member's id and epoch
from v9, and ``require_stable`` from v7). Those two requests are frozen dataclasses read once from
kio's class of any version, a field a version lacks taking Kafka's default. OffsetDelete has one
version, whose class satisfies its Protocol as it is (mypy checks it below), as kio's OffsetFetch of
each version satisfies what the ACL rule reads of it (:class:`OneGroupOffsetFetch` before v8,
:class:`GroupsOffsetFetch` from v8).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

OFFSET_DELETE_VERSIONS = range(0, 1)  # protocol/versions.py: GROUP_MAX_VERSIONS[47]
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


class OneGroupOffsetFetch(Protocol):
    """OffsetFetch v1 to v7 as the ACL rule reads kio's class: the one group."""

    @property
    def group_id(self) -> str: ...


class NamedGroup(Protocol):
    @property
    def group_id(self) -> str: ...


class GroupsOffsetFetch(Protocol):
    """OffsetFetch v8 on as the ACL rule reads kio's class: the batch of groups."""

    @property
    def groups(self) -> Sequence[NamedGroup]: ...


class OffsetDeletePartition(Protocol):
    @property
    def partition_index(self) -> int: ...


class OffsetDeleteTopic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[OffsetDeletePartition]: ...


class OffsetDeleteRequest(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def topics(self) -> Sequence[OffsetDeleteTopic]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.offset_delete.v0.request import OffsetDeleteRequest as OffsetDelete0
    from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as OffsetFetch1
    from kio.schema.offset_fetch.v2.request import OffsetFetchRequest as OffsetFetch2
    from kio.schema.offset_fetch.v3.request import OffsetFetchRequest as OffsetFetch3
    from kio.schema.offset_fetch.v4.request import OffsetFetchRequest as OffsetFetch4
    from kio.schema.offset_fetch.v5.request import OffsetFetchRequest as OffsetFetch5
    from kio.schema.offset_fetch.v6.request import OffsetFetchRequest as OffsetFetch6
    from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetch7
    from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as OffsetFetch8
    from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as OffsetFetch9

    def _offset_delete(request: OffsetDelete0) -> OffsetDeleteRequest:
        return request

    def _before_v8_one_group(
        request: OffsetFetch1
        | OffsetFetch2
        | OffsetFetch3
        | OffsetFetch4
        | OffsetFetch5
        | OffsetFetch6
        | OffsetFetch7,
    ) -> OneGroupOffsetFetch:
        return request

    def _from_v8_a_batch(request: OffsetFetch8 | OffsetFetch9) -> GroupsOffsetFetch:
        return request
