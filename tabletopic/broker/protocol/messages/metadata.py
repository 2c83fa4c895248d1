"""Metadata (3): the topics a client asks about and whether it lets the broker create them.

Metadata is asked for often (every client on start, on each error and every few minutes), so the
handler reads kio's class of each served version (v0 to v13) as it is, converted for no request.
Fields only later versions carry (``allow_auto_topic_creation`` from v4, a topic's ``topic_id`` from
v10, the authorized operations from v8) are read through the functions below, which take the
version and answer Kafka's default for older ones. A request's ``topics`` is None (v1 on) or empty
(v0) for every topic.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, TypeAlias, cast

if TYPE_CHECKING:
    from kio.schema.metadata.v0 import request as v0
    from kio.schema.metadata.v1 import request as v1
    from kio.schema.metadata.v2 import request as v2
    from kio.schema.metadata.v3 import request as v3
    from kio.schema.metadata.v4 import request as v4
    from kio.schema.metadata.v5 import request as v5
    from kio.schema.metadata.v6 import request as v6
    from kio.schema.metadata.v7 import request as v7
    from kio.schema.metadata.v8 import request as v8
    from kio.schema.metadata.v9 import request as v9
    from kio.schema.metadata.v10 import request as v10
    from kio.schema.metadata.v11 import request as v11
    from kio.schema.metadata.v12 import request as v12
    from kio.schema.metadata.v13 import request as v13

AUTO_CREATION_SINCE = 4  # before v4 a client cannot refuse auto-creation: the broker's setting rules
TOPIC_ID_SINCE = 10  # KIP-516: a topic entry carries an id field...
TOPICS_BY_ID_SINCE = 12  # ...which may name the topic (its name null) only from v12
AUTHORIZED_OPERATIONS_SINCE = 8  # KIP-430: the client may ask for its authorized operations
CLUSTER_OPERATIONS_BEFORE = 11  # KIP-700: from v11 DescribeCluster answers the cluster's

MetadataRequest: TypeAlias = (
    "v0.MetadataRequest | v1.MetadataRequest | v2.MetadataRequest | v3.MetadataRequest | "
    "v4.MetadataRequest | v5.MetadataRequest | v6.MetadataRequest | v7.MetadataRequest | "
    "v8.MetadataRequest | v9.MetadataRequest | v10.MetadataRequest | v11.MetadataRequest | "
    "v12.MetadataRequest | v13.MetadataRequest"
)
MetadataRequestTopic: TypeAlias = (
    "v0.MetadataRequestTopic | v1.MetadataRequestTopic | v2.MetadataRequestTopic | "
    "v3.MetadataRequestTopic | v4.MetadataRequestTopic | v5.MetadataRequestTopic | "
    "v6.MetadataRequestTopic | v7.MetadataRequestTopic | v8.MetadataRequestTopic | "
    "v9.MetadataRequestTopic | v10.MetadataRequestTopic | v11.MetadataRequestTopic | "
    "v12.MetadataRequestTopic | v13.MetadataRequestTopic"
)
MetadataRequestTopicById: TypeAlias = (
    "v10.MetadataRequestTopic | v11.MetadataRequestTopic | v12.MetadataRequestTopic | "
    "v13.MetadataRequestTopic"
)
"""A topic entry of v10 on, which may name the topic by id instead of by name."""
AutoCreatingMetadataRequest: TypeAlias = (
    "v4.MetadataRequest | v5.MetadataRequest | v6.MetadataRequest | v7.MetadataRequest | "
    "v8.MetadataRequest | v9.MetadataRequest | v10.MetadataRequest | v11.MetadataRequest | "
    "v12.MetadataRequest | v13.MetadataRequest"
)
"""A Metadata request of v4 on, which says whether unknown topics may be created."""
TopicOperationsMetadataRequest: TypeAlias = (
    "v8.MetadataRequest | v9.MetadataRequest | v10.MetadataRequest | v11.MetadataRequest | "
    "v12.MetadataRequest | v13.MetadataRequest"
)
"""A Metadata request of v8 on, which may ask for each topic's authorized operations."""
ClusterOperationsMetadataRequest: TypeAlias = "v8.MetadataRequest | v9.MetadataRequest | v10.MetadataRequest"
"""A Metadata request of v8 to v10, which may ask for the cluster's authorized operations."""


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
