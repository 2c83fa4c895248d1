"""DescribeCluster (60): the answer (the handler reads nothing of the request: its fields ask for
what the broker answers anyway, or leaves out: authorized operations, fenced brokers; the ACL rule
reads whether the authorized operations are asked for, a field of every served version, v0 to v2).

The response is a TypedDict in the newest version's shape, which the response builder fits to the
client's version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypeAlias, TypedDict

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from kio.schema.describe_cluster.v0 import request as v0
    from kio.schema.describe_cluster.v1 import request as v1
    from kio.schema.describe_cluster.v2 import request as v2

BROKERS_ENDPOINT = 1  # endpoint_type: the brokers' listeners (2 would be the controllers')
NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's INT32_MIN when not asked for

DescribeClusterRequest: TypeAlias = (
    "v0.DescribeClusterRequest | v1.DescribeClusterRequest | v2.DescribeClusterRequest"
)


class DescribeClusterBroker(TypedDict):
    broker_id: int
    host: str
    port: int
    rack: str | None
    is_fenced: NotRequired[bool]  # v2 on; only live brokers are listed


class DescribeClusterResponse(TypedDict):
    throttle_time: int
    error_code: ErrorCode
    error_message: str | None
    endpoint_type: int
    cluster_id: str
    controller_id: int
    brokers: list[DescribeClusterBroker]
    cluster_authorized_operations: int
