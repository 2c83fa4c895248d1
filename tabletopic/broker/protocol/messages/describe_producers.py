"""DescribeProducers (61): the partitions whose active producers a client asks for (served v0)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.describe_producers.v0 import request as v0

DescribeProducersRequest: TypeAlias = "v0.DescribeProducersRequest"
