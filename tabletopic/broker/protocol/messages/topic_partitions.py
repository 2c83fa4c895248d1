"""The two ways Kafka's schemas name a topic's partitions by index, shared by the request types of
several APIs (each module checks its own versions against them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class TopicPartitionIndexes(Protocol):
    """``name`` and ``partition_indexes`` (DescribeProducers, ListPartitionReassignments,
    WriteTxnMarkers)."""

    @property
    def name(self) -> str: ...

    @property
    def partition_indexes(self) -> Sequence[int]: ...


class TopicAndPartitions(Protocol):
    """``topic`` and ``partitions`` (DescribeLogDirs, ElectLeaders)."""

    @property
    def topic(self) -> str: ...

    @property
    def partitions(self) -> Sequence[int]: ...
