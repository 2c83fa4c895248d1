"""DescribeQuorum (55): the KRaft partitions whose quorum a client asks about (served v0 to v2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.describe_quorum.v0 import request as v0
    from kio.schema.describe_quorum.v1 import request as v1
    from kio.schema.describe_quorum.v2 import request as v2

DescribeQuorumRequest: TypeAlias = (
    "v0.DescribeQuorumRequest | v1.DescribeQuorumRequest | v2.DescribeQuorumRequest"
)
