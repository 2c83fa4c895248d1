"""DescribeCluster (60): the answer (the handler reads nothing of the request: its fields ask for
what the broker answers anyway, or leaves out: authorized operations, fenced brokers; the ACL rule
reads whether the authorized operations are asked for, a field of every served version, v0 to v2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.describe_cluster.v0 import request as v0
    from kio.schema.describe_cluster.v1 import request as v1
    from kio.schema.describe_cluster.v2 import request as v2

BROKERS_ENDPOINT = 1  # endpoint_type: the brokers' listeners (2 would be the controllers')
NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's INT32_MIN when not asked for

DescribeClusterRequest: TypeAlias = (
    "v0.DescribeClusterRequest | v1.DescribeClusterRequest | v2.DescribeClusterRequest"
)
