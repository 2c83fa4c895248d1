"""DescribeProducers (61), version-free: the partitions whose active producers a client asks for.

The one served version's class satisfies the Protocol as it is (mypy checks it below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from tabletopic.broker.protocol.messages.topic_partitions import TopicPartitionIndexes

SERVED_VERSIONS = range(0, 1)  # protocol/versions.py: MAX_VERSIONS[61]


class DescribeProducersRequest(Protocol):
    @property
    def topics(self) -> Sequence[TopicPartitionIndexes]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest as V0

    def _every_version_is_a_describe_producers_request(request: V0) -> DescribeProducersRequest:
        return request
