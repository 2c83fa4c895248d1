"""DescribeCluster (60), version-free: the answer (the handler reads nothing of the request: its
fields ask for what the broker answers anyway, or leaves out: authorized operations, fenced brokers;
the ACL rule reads whether the authorized operations are asked for, a field of every version, so
kio's class of each satisfies :class:`DescribeClusterRequest` as it is; mypy checks it below).

The response is a TypedDict in the newest version's shape, which the response builder fits to the
client's version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

from kio.schema.errors import ErrorCode

BROKERS_ENDPOINT = 1  # endpoint_type: the brokers' listeners (2 would be the controllers')
NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's INT32_MIN when not asked for
SERVED_VERSIONS = range(0, 3)  # protocol/versions.py: MAX_VERSIONS[60]


class DescribeClusterRequest(Protocol):
    @property
    def include_cluster_authorized_operations(self) -> bool: ...


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


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.describe_cluster.v0.request import DescribeClusterRequest as V0
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest as V1
    from kio.schema.describe_cluster.v2.request import DescribeClusterRequest as V2

    def _every_version_is_a_describe_cluster_request(request: V0 | V1 | V2) -> DescribeClusterRequest:
        return request
