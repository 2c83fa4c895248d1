"""DescribeLogDirs (35), version-free: the partitions whose log dirs a client asks about.

Every served version (v1 to v4) has the one field the handler reads, so the request type is a
Protocol kio's class of each version satisfies as it is (mypy checks each below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from tabletopic.broker.protocol.messages.topic_partitions import TopicAndPartitions

SERVED_VERSIONS = range(1, 5)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[35]


class DescribeLogDirsRequest(Protocol):
    @property
    def topics(self) -> Sequence[TopicAndPartitions] | None:
        """None for every partition."""
        ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.describe_log_dirs.v1.request import DescribeLogDirsRequest as V1
    from kio.schema.describe_log_dirs.v2.request import DescribeLogDirsRequest as V2
    from kio.schema.describe_log_dirs.v3.request import DescribeLogDirsRequest as V3
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest as V4

    def _every_version_is_a_describe_log_dirs_request(request: V1 | V2 | V3 | V4) -> DescribeLogDirsRequest:
        return request
