"""DescribeQuorum (55), version-free: the KRaft partitions whose quorum a client asks about.

Every served version (v0 to v2) has the fields the handler reads, so the request type is a Protocol
kio's class of each version satisfies as it is (mypy checks each below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

SERVED_VERSIONS = range(0, 3)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[55]


class QuorumPartition(Protocol):
    @property
    def partition_index(self) -> int: ...


class QuorumTopic(Protocol):
    @property
    def topic_name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[QuorumPartition]: ...


class DescribeQuorumRequest(Protocol):
    @property
    def topics(self) -> Sequence[QuorumTopic]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.describe_quorum.v0.request import DescribeQuorumRequest as V0
    from kio.schema.describe_quorum.v1.request import DescribeQuorumRequest as V1
    from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest as V2

    def _every_version_is_a_describe_quorum_request(request: V0 | V1 | V2) -> DescribeQuorumRequest:
        return request
