"""One module per Kafka API; :data:`HANDLERS` and :data:`GROUP_HANDLERS` map API keys to their
``handle`` coroutines.

A handler takes ``(state, ctx, request)``. The state is the
:class:`~tabletopic.broker.service.BrokerService` for :data:`HANDLERS` and the
:class:`~tabletopic.broker.groups.coordinator.GroupCoordinator` for the consumer-group APIs of
:data:`GROUP_HANDLERS`, which resolve per-version request differences into the coordinator's
version-free calls. The typed APIs (all but ApiVersions, the share-group ones and the
consumer-group ones other than FindCoordinator) take a version-free request type of
:mod:`tabletopic.broker.protocol.messages`: a Protocol kio's object of every served version
satisfies as it is, or, where kio's classes differ per version, a dataclass the request is read
into by :func:`typed` below, the one place that maps them. The others still take the kio request
object of whatever version the client sent. Handlers return a dict (a TypedDict where the API has a
response type) shaped like the newest response version (see
:func:`tabletopic.broker.protocol.build_response`), a ``WireResponse`` they encoded themselves
(Fetch's zero-copy path), or None when no response is to be sent (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tabletopic.broker.handlers import (
    alter_configs,
    alter_replica_log_dirs,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    share_group_offsets,
    sync_group,
    transactions,
    write_txn_markers,
)
from tabletopic.broker.handlers.common import typed
from tabletopic.broker.protocol.messages.delete_topics import DeleteTopicsRequest
from tabletopic.broker.protocol.messages.describe_configs import DescribeConfigsRequest
from tabletopic.broker.protocol.messages.find_coordinator import FindCoordinatorRequest
from tabletopic.broker.protocol.messages.init_producer_id import InitProducerIdRequest
from tabletopic.broker.protocol.messages.list_offsets import ListOffsetsRequest
from tabletopic.broker.protocol.messages.transactions import TxnOffsetCommitRequest

Handler = Callable[[Any, Any, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: produce.handle,
    1: fetch.handle,
    2: typed(list_offsets.handle, ListOffsetsRequest),
    3: metadata.handle,
    18: api_versions.handle,
    19: create_topics.handle,
    20: typed(delete_topics.handle, DeleteTopicsRequest),
    21: delete_records.handle,
    22: typed(init_producer_id.handle, InitProducerIdRequest),
    23: offset_for_leader_epoch.handle,
    24: transactions.add_partitions,
    25: transactions.add_offsets,
    26: transactions.end_txn,
    27: write_txn_markers.handle,
    28: typed(transactions.txn_offset_commit, TxnOffsetCommitRequest),
    32: typed(describe_configs.handle, DescribeConfigsRequest),
    33: alter_configs.handle,
    34: alter_replica_log_dirs.handle,
    35: describe_log_dirs.handle,
    37: create_partitions.handle,
    43: elect_leaders.handle,
    44: incremental_alter_configs.handle,
    45: partition_reassignments.handle_alter,
    46: partition_reassignments.handle_list,
    55: describe_quorum.handle,
    60: describe_cluster.handle,
    61: describe_producers.handle,
    65: transactions.describe,
    66: transactions.list_transactions,
    75: describe_topic_partitions.handle,
    78: share_fetch.handle,
    79: share_acknowledge.handle,
}

GROUP_HANDLERS: dict[int, Handler] = {
    8: offset_commit.handle,
    9: offset_fetch.handle,
    10: typed(find_coordinator.handle, FindCoordinatorRequest),
    11: join_group.handle,
    12: heartbeat.handle,
    13: leave_group.handle,
    14: sync_group.handle,
    15: describe_groups.handle,
    16: list_groups.handle,
    42: delete_groups.handle,
    47: offset_delete.handle,
    68: consumer_group_heartbeat.handle,
    69: consumer_group_describe.handle,
    76: share_group_heartbeat.handle,
    77: share_group_describe.handle,
    90: share_group_offsets.describe,
    91: share_group_offsets.alter,
    92: share_group_offsets.delete,
}
