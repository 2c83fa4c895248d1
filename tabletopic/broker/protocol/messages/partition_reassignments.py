"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), version-free: the moves
asked for, and the partitions whose moves a client lists.

Each API has one served version, whose class satisfies its Protocol as it is (mypy checks both
below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from tabletopic.broker.protocol.messages.topic_partitions import TopicPartitionIndexes

ALTER_VERSIONS = range(0, 1)  # protocol/versions.py: MAX_VERSIONS[45]
LIST_VERSIONS = range(0, 1)  # protocol/versions.py: MAX_VERSIONS[46]


class ReassignablePartition(Protocol):
    @property
    def partition_index(self) -> int: ...

    @property
    def replicas(self) -> Sequence[int] | None:
        """The replicas to move to; None cancels the partition's move under way."""
        ...


class ReassignableTopic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[ReassignablePartition]: ...


class AlterPartitionReassignmentsRequest(Protocol):
    @property
    def topics(self) -> Sequence[ReassignableTopic]: ...


class ListPartitionReassignmentsRequest(Protocol):
    @property
    def topics(self) -> Sequence[TopicPartitionIndexes] | None:
        """None for every move under way."""
        ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest as Alter0,
    )
    from kio.schema.list_partition_reassignments.v0.request import (
        ListPartitionReassignmentsRequest as List0,
    )

    def _alter(request: Alter0) -> AlterPartitionReassignmentsRequest:
        return request

    def _list(request: List0) -> ListPartitionReassignmentsRequest:
        return request
