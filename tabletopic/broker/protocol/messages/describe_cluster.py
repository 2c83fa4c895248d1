"""DescribeCluster (60), version-free: the answer (the handler reads nothing of the request: its
fields ask for what the broker answers anyway, or leaves out: authorized operations, fenced brokers).

The response is a TypedDict in the newest version's shape, which the response builder fits to the
client's version.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from kio.schema.errors import ErrorCode

BROKERS_ENDPOINT = 1  # endpoint_type: the brokers' listeners (2 would be the controllers')
NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's INT32_MIN when not asked for


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
