"""Metadata (3), version-free: the topics a client asks about and whether it lets the broker create
them.

Metadata is asked for often (every client on start, on each error and every few minutes), so the
request type is a Protocol that kio's class of every served version (v0 to v13) satisfies as it is,
converted for no request. Fields only later versions carry (``allow_auto_topic_creation`` from v4,
a topic's ``topic_id`` from v10) are read through the functions below, which take the version and
answer Kafka's default for older ones; mypy checks at the end of this module that each version fits.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, cast

SERVED_VERSIONS = range(0, 14)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[3]
AUTO_CREATION_SINCE = 4  # before v4 a client cannot refuse auto-creation: the broker's setting rules
TOPIC_ID_SINCE = 10  # KIP-516: a topic asked for by id
AUTHORIZED_OPERATIONS_SINCE = 8  # KIP-430: the client may ask for its authorized operations
CLUSTER_OPERATIONS_BEFORE = 11  # KIP-700: from v11 DescribeCluster answers the cluster's


class MetadataRequestTopic(Protocol):
    @property
    def name(self) -> str | None: ...


class MetadataRequestTopicById(MetadataRequestTopic, Protocol):
    """A topic entry of v10 on, which may name the topic by id instead of by name."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...


class MetadataRequest(Protocol):
    @property
    def topics(self) -> Sequence[MetadataRequestTopic] | None:
        """The topics asked about; None (v1 on) or empty (v0) for all."""
        ...


class AutoCreatingMetadataRequest(MetadataRequest, Protocol):
    """A Metadata request of v4 on, which says whether unknown topics may be created."""

    @property
    def allow_auto_topic_creation(self) -> bool: ...


class TopicOperationsMetadataRequest(MetadataRequest, Protocol):
    """A Metadata request of v8 on, which may ask for each topic's authorized operations."""

    @property
    def include_topic_authorized_operations(self) -> bool: ...


class ClusterOperationsMetadataRequest(MetadataRequest, Protocol):
    """A Metadata request of v8 to v10, which may ask for the cluster's authorized operations."""

    @property
    def include_cluster_authorized_operations(self) -> bool: ...


def asks_topic_operations(request: MetadataRequest, version: int) -> bool:
    """Whether the client asks for each topic's authorized operations (it cannot before v8)."""
    if version < AUTHORIZED_OPERATIONS_SINCE:
        return False
    return cast(TopicOperationsMetadataRequest, request).include_topic_authorized_operations


def asks_cluster_operations(request: MetadataRequest, version: int) -> bool:
    """Whether the client asks for the cluster's authorized operations (v8 to v10 only)."""
    if not AUTHORIZED_OPERATIONS_SINCE <= version < CLUSTER_OPERATIONS_BEFORE:
        return False
    return cast(ClusterOperationsMetadataRequest, request).include_cluster_authorized_operations


def allows_auto_creation(request: MetadataRequest, version: int) -> bool:
    """Whether the client lets the broker create the unknown topics it asks about."""
    if version < AUTO_CREATION_SINCE:
        return True
    return cast(AutoCreatingMetadataRequest, request).allow_auto_topic_creation


def topic_id_of(topic: MetadataRequestTopic, version: int) -> uuid.UUID | None:
    """The id a topic entry names (None before v10, which asks by name only)."""
    if version < TOPIC_ID_SINCE:
        return None
    return cast(MetadataRequestTopicById, topic).topic_id


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.metadata.v0.request import MetadataRequest as V0
    from kio.schema.metadata.v1.request import MetadataRequest as V1
    from kio.schema.metadata.v2.request import MetadataRequest as V2
    from kio.schema.metadata.v3.request import MetadataRequest as V3
    from kio.schema.metadata.v4.request import MetadataRequest as V4
    from kio.schema.metadata.v5.request import MetadataRequest as V5
    from kio.schema.metadata.v6.request import MetadataRequest as V6
    from kio.schema.metadata.v7.request import MetadataRequest as V7
    from kio.schema.metadata.v8.request import MetadataRequest as V8
    from kio.schema.metadata.v9.request import MetadataRequest as V9
    from kio.schema.metadata.v10.request import MetadataRequest as V10
    from kio.schema.metadata.v10.request import MetadataRequestTopic as T10
    from kio.schema.metadata.v11.request import MetadataRequest as V11
    from kio.schema.metadata.v11.request import MetadataRequestTopic as T11
    from kio.schema.metadata.v12.request import MetadataRequest as V12
    from kio.schema.metadata.v12.request import MetadataRequestTopic as T12
    from kio.schema.metadata.v13.request import MetadataRequest as V13
    from kio.schema.metadata.v13.request import MetadataRequestTopic as T13

    def _every_version_is_a_metadata_request(
        request: V0 | V1 | V2 | V3 | V4 | V5 | V6 | V7 | V8 | V9 | V10 | V11 | V12 | V13,
    ) -> MetadataRequest:
        return request

    def _from_v4_the_client_rules_auto_creation(
        request: V4 | V5 | V6 | V7 | V8 | V9 | V10 | V11 | V12 | V13,
    ) -> AutoCreatingMetadataRequest:
        return request

    def _from_v8_the_topics_operations_may_be_asked_for(
        request: V8 | V9 | V10 | V11 | V12 | V13,
    ) -> TopicOperationsMetadataRequest:
        return request

    def _from_v8_to_v10_the_clusters_operations_may_be_asked_for(
        request: V8 | V9 | V10,
    ) -> ClusterOperationsMetadataRequest:
        return request

    def _from_v10_a_topic_may_be_named_by_id(topic: T10 | T11 | T12 | T13) -> MetadataRequestTopicById:
        return topic
