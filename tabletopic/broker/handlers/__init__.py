"""One module per Kafka API (or small family of APIs); :data:`APIS` is the one dispatch table: every
API key the broker serves, with its ``handle`` coroutine and the :class:`State` it runs against.

A handler takes ``(state, ctx, request)``. The state is the
:class:`~tabletopic.broker.service.BrokerService` (:attr:`State.BROKER`), the
:class:`~tabletopic.broker.groups.coordinator.GroupCoordinator` for the consumer- and share-group
APIs (:attr:`State.GROUPS`, which resolve per-version request differences into the coordinator's
version-free calls), or the node's security state in ``broker/security`` for the ACL, quota and
SCRAM APIs (:attr:`State.ACLS`, :attr:`State.QUOTAS`, :attr:`State.SCRAM`). SaslHandshake and
SaslAuthenticate are answered by the connection itself, before any handler.

Every handler takes a request type of :mod:`tabletopic.broker.protocol.messages` (ApiVersions
reads nothing of its request): the union of kio's class of every served version, which it reads as
it is, or, where kio's classes differ per version, a version-free dataclass the request is read into
by :func:`typed` below, the one place that maps them. Handlers return their API's response type
of :mod:`tabletopic.broker.protocol.responses` (a TypedDict generated from kio's classes, shaped
like the newest version, which :func:`tabletopic.broker.protocol.build_response` fits to the
client's), a ``WireResponse`` they encoded themselves (Fetch's zero-copy path), or None when no
response is to be sent (Produce with acks=0).
:data:`HANDLERS` and :data:`GROUP_HANDLERS` are the table's broker and group APIs.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from tabletopic.broker.handlers import (
    acls,
    alter_configs,
    alter_replica_log_dirs,
    api_versions,
    client_quotas,
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
    unregister_broker,
    user_scram_credentials,
    write_txn_markers,
)
from tabletopic.broker.handlers.common import typed
from tabletopic.broker.protocol.messages.delete_topics import DeleteTopicsRequest
from tabletopic.broker.protocol.messages.describe_configs import DescribeConfigsRequest
from tabletopic.broker.protocol.messages.find_coordinator import FindCoordinatorRequest
from tabletopic.broker.protocol.messages.groups import DescribeGroupsRequest, ListGroupsRequest
from tabletopic.broker.protocol.messages.init_producer_id import InitProducerIdRequest
from tabletopic.broker.protocol.messages.join_group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from tabletopic.broker.protocol.messages.list_offsets import ListOffsetsRequest
from tabletopic.broker.protocol.messages.offset_commit import OffsetCommitRequest, OffsetFetchRequest
from tabletopic.broker.protocol.messages.transactions import TxnOffsetCommitRequest

Handler = Callable[[Any, Any, Any], Awaitable[Any]]


class State(enum.Enum):
    """What an API's handler runs against."""

    BROKER = "broker service"
    GROUPS = "group coordinator"
    ACLS = "ACL service"
    QUOTAS = "quota service"
    SCRAM = "SCRAM credential store"


class Api(NamedTuple):
    state: State
    handle: Handler


_BROKER, _GROUPS = State.BROKER, State.GROUPS

APIS: dict[int, Api] = {
    0: Api(_BROKER, produce.handle),
    1: Api(_BROKER, fetch.handle),
    2: Api(_BROKER, typed(list_offsets.handle, ListOffsetsRequest)),
    3: Api(_BROKER, metadata.handle),
    8: Api(_GROUPS, typed(offset_commit.handle, OffsetCommitRequest)),
    9: Api(_GROUPS, typed(offset_fetch.handle, OffsetFetchRequest)),
    10: Api(_GROUPS, typed(find_coordinator.handle, FindCoordinatorRequest)),
    11: Api(_GROUPS, typed(join_group.handle, JoinGroupRequest)),
    12: Api(_GROUPS, typed(heartbeat.handle, HeartbeatRequest)),
    13: Api(_GROUPS, typed(leave_group.handle, LeaveGroupRequest)),
    14: Api(_GROUPS, typed(sync_group.handle, SyncGroupRequest)),
    15: Api(_GROUPS, typed(describe_groups.handle, DescribeGroupsRequest)),
    16: Api(_GROUPS, typed(list_groups.handle, ListGroupsRequest)),
    18: Api(_BROKER, api_versions.handle),
    19: Api(_BROKER, create_topics.handle),
    20: Api(_BROKER, typed(delete_topics.handle, DeleteTopicsRequest)),
    21: Api(_BROKER, delete_records.handle),
    22: Api(_BROKER, typed(init_producer_id.handle, InitProducerIdRequest)),
    23: Api(_BROKER, offset_for_leader_epoch.handle),
    24: Api(_BROKER, transactions.add_partitions),
    25: Api(_BROKER, transactions.add_offsets),
    26: Api(_BROKER, transactions.end_txn),
    27: Api(_BROKER, write_txn_markers.handle),
    28: Api(_BROKER, typed(transactions.txn_offset_commit, TxnOffsetCommitRequest)),
    29: Api(State.ACLS, acls.describe),
    30: Api(State.ACLS, acls.create),
    31: Api(State.ACLS, acls.delete),
    32: Api(_BROKER, typed(describe_configs.handle, DescribeConfigsRequest)),
    33: Api(_BROKER, alter_configs.handle),
    34: Api(_BROKER, alter_replica_log_dirs.handle),
    35: Api(_BROKER, describe_log_dirs.handle),
    37: Api(_BROKER, create_partitions.handle),
    42: Api(_GROUPS, delete_groups.handle),
    43: Api(_BROKER, elect_leaders.handle),
    44: Api(_BROKER, incremental_alter_configs.handle),
    45: Api(_BROKER, partition_reassignments.handle_alter),
    46: Api(_BROKER, partition_reassignments.handle_list),
    47: Api(_GROUPS, offset_delete.handle),
    48: Api(State.QUOTAS, client_quotas.describe),
    49: Api(State.QUOTAS, client_quotas.alter),
    50: Api(State.SCRAM, user_scram_credentials.describe),
    51: Api(State.SCRAM, user_scram_credentials.alter),
    55: Api(_BROKER, describe_quorum.handle),
    60: Api(_BROKER, describe_cluster.handle),
    61: Api(_BROKER, describe_producers.handle),
    64: Api(_BROKER, unregister_broker.handle),
    65: Api(_BROKER, transactions.describe),
    66: Api(_BROKER, transactions.list_transactions),
    68: Api(_GROUPS, consumer_group_heartbeat.handle),
    69: Api(_GROUPS, consumer_group_describe.handle),
    75: Api(_BROKER, describe_topic_partitions.handle),
    76: Api(_GROUPS, share_group_heartbeat.handle),
    77: Api(_GROUPS, share_group_describe.handle),
    78: Api(_BROKER, share_fetch.handle),
    79: Api(_BROKER, share_acknowledge.handle),
    90: Api(_GROUPS, share_group_offsets.describe),
    91: Api(_GROUPS, share_group_offsets.alter),
    92: Api(_GROUPS, share_group_offsets.delete),
}


def handlers_of(state: State) -> dict[int, Handler]:
    """The APIs of the table that run against ``state``, by key."""
    return {key: api.handle for key, api in APIS.items() if api.state is state}


HANDLERS: dict[int, Handler] = handlers_of(State.BROKER)
GROUP_HANDLERS: dict[int, Handler] = handlers_of(State.GROUPS)
