"""DescribeTopicPartitions (75), version-free: the topics a client pages through, and where to
resume.

The one served version's class satisfies the Protocol as it is (mypy checks it below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

SERVED_VERSIONS = range(0, 1)  # protocol/versions.py: MAX_VERSIONS[75]


class TopicRequest(Protocol):
    @property
    def name(self) -> str: ...


class Cursor(Protocol):
    """The topic and partition the previous page stopped at."""

    @property
    def topic_name(self) -> str: ...

    @property
    def partition_index(self) -> int: ...


class DescribeTopicPartitionsRequest(Protocol):
    @property
    def topics(self) -> Sequence[TopicRequest]:
        """Empty for every topic."""
        ...

    @property
    def response_partition_limit(self) -> int: ...

    @property
    def cursor(self) -> Cursor | None: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest as V0

    def _every_version_is_a_describe_topic_partitions_request(request: V0) -> DescribeTopicPartitionsRequest:
        return request
