"""ListOffsets (2), version-free: the offsets asked for by timestamp (or a sentinel of
:mod:`~tabletopic.broker.protocol.sentinels`).

Versions differ in what a request holds (``isolation_level`` from v2, ``current_leader_epoch`` from
v4), so the request is a frozen dataclass read from kio's class of any version
(:func:`~tabletopic.broker.protocol.messages.convert.read_message`), a missing field taking its
default here.
"""

from __future__ import annotations

from dataclasses import dataclass

from tabletopic.broker.protocol.sentinels import READ_UNCOMMITTED

NO_LEADER_EPOCH = -1  # a partition's current_leader_epoch when the client names none (before v4)


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    partition_index: int
    timestamp: int
    current_leader_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    topics: tuple[ListOffsetsTopic, ...]
    replica_id: int = -1
    isolation_level: int = READ_UNCOMMITTED  # v2 on
