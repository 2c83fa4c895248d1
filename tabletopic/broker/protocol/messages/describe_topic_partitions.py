"""DescribeTopicPartitions (75): the topics a client pages through (none for every topic), and the
``cursor`` (topic and partition) the previous page stopped at (served v0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.describe_topic_partitions.v0 import request as v0

DescribeTopicPartitionsRequest: TypeAlias = "v0.DescribeTopicPartitionsRequest"
