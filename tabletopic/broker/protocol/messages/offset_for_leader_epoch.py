"""OffsetForLeaderEpoch (23), version-free: the end offset of a leader epoch, asked for per partition.

Every served version (v2 to v4) has the fields the handler reads, so the request type is a Protocol
kio's class of each version satisfies as it is (mypy checks each at the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

SERVED_VERSIONS = range(2, 5)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[23]


class OffsetForLeaderPartition(Protocol):
    @property
    def partition(self) -> int: ...

    @property
    def current_leader_epoch(self) -> int:
        """The epoch the client knows the leader by (KIP-320), -1 for none."""
        ...

    @property
    def leader_epoch(self) -> int:
        """The epoch whose end offset is asked for."""
        ...


class OffsetForLeaderTopic(Protocol):
    @property
    def topic(self) -> str: ...

    @property
    def partitions(self) -> Sequence[OffsetForLeaderPartition]: ...


class OffsetForLeaderEpochRequest(Protocol):
    @property
    def topics(self) -> Sequence[OffsetForLeaderTopic]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.offset_for_leader_epoch.v2.request import OffsetForLeaderEpochRequest as V2
    from kio.schema.offset_for_leader_epoch.v3.request import OffsetForLeaderEpochRequest as V3
    from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest as V4

    def _every_version_is_an_offset_for_leader_epoch_request(
        request: V2 | V3 | V4,
    ) -> OffsetForLeaderEpochRequest:
        return request
