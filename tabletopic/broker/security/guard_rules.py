"""Which ACL each Kafka API needs, following Kafka's request handlers (``KafkaApis``): topic data
APIs check each topic, group APIs the group, admin APIs the topic or the cluster; refusals go where
that part's answer goes, with Kafka's error code.

A rule reads kio's request object of the client's version (it hands the handler that object, or one
narrowed to what the principal may touch), typed as the handler's request type of
:mod:`tabletopic.broker.protocol.messages` where that is the union of kio's classes, as the union
of just the versions it reads where a field comes with a later version (taken by version), as a
Protocol of just what it reads where the rule serves several APIs (:class:`GroupRequest`,
:class:`~tabletopic.broker.security.guard.TopicsRequest`), and as the handler's version-free
dataclass where it only reads fields (FindCoordinator, DescribeGroups, InitProducerId).
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.answers import write_txn_markers_answer
from tabletopic.broker.protocol.messages.acls import CreateAclsRequest, DeleteAclsRequest
from tabletopic.broker.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from tabletopic.broker.protocol.messages.consumer_groups import GroupsDescription
from tabletopic.broker.protocol.messages.convert import read_message
from tabletopic.broker.protocol.messages.create_partitions import CreatePartitionsRequest
from tabletopic.broker.protocol.messages.create_topics import CreateTopicsRequest
from tabletopic.broker.protocol.messages.delete_topics import (
    TOPIC_STATES_SINCE,
    DeleteTopicNamesRequest,
    DeleteTopicStatesRequest,
)
from tabletopic.broker.protocol.messages.describe_cluster import DescribeClusterRequest
from tabletopic.broker.protocol.messages.describe_configs import ConfigResource
from tabletopic.broker.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from tabletopic.broker.protocol.messages.elect_leaders import ElectLeadersRequest
from tabletopic.broker.protocol.messages.find_coordinator import (
    COORDINATOR_KEYS_SINCE,
    TRANSACTION_KEY,
    FindCoordinatorRequest,
)
from tabletopic.broker.protocol.messages.groups import DeleteGroupsRequest, DescribeGroupsRequest
from tabletopic.broker.protocol.messages.init_producer_id import InitProducerIdRequest
from tabletopic.broker.protocol.messages.metadata import (
    MetadataRequest,
    allows_auto_creation,
    asks_cluster_operations,
    asks_topic_operations,
    topic_id_of,
)
from tabletopic.broker.protocol.messages.offset_commit import (
    BATCHED_FETCH_SINCE,
    GroupsOffsetFetch,
    OffsetDeleteRequest,
    OneGroupOffsetFetch,
)
from tabletopic.broker.protocol.messages.produce import ProduceRequest
from tabletopic.broker.protocol.messages.transactions import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    DescribeTransactionsRequest,
    ProducerRequest,
    TxnOffsetCommitScope,
)
from tabletopic.broker.protocol.messages.user_scram_credentials import AlterUserScramCredentialsRequest
from tabletopic.broker.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from tabletopic.broker.security import share_rules
from tabletopic.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from tabletopic.broker.security.guard import (
    NOT_REQUESTED,
    Call,
    Check,
    Response,
    Rule,
    TopicShape,
    TopicsRequest,
    answer_split,
    cluster_rule,
    narrowed,
    split_topics,
)

TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed

PRODUCE = TopicShape(
    "topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses", "index",
    (("base_offset", -1), ("log_append_time", -1), ("log_start_offset", -1)),
)  # fmt: skip
# A refused partition carries empty records, as Kafka's (``MemoryRecords.EMPTY``): records are
# nullable in the schema, but librdkafka reads a null as "invalid MessageSetSize -1", fails the
# whole response and retries it forever, so the application never sees the authorization error.
FETCH_BY_NAME = TopicShape(
    "topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index",
    (("high_watermark", -1), ("last_stable_offset", -1), ("log_start_offset", -1), ("records", b"")),
    (("error_code", ErrorCode.none), ("session_id", 0)),
)  # fmt: skip
FETCH_BY_ID = TopicShape(
    "topics", "topic_id", "partitions", "partition", "responses", "topic_id", "partitions", "partition_index",
    FETCH_BY_NAME.error_fields, FETCH_BY_NAME.top_fields,
)  # fmt: skip
# Kafka's usual names, in the request as in the response: a list "topics" of topics by "name", each
# with a list "partitions" of partitions by "partition_index". The APIs that keep them differ only
# in what a refused partition carries besides its error code.
_USUAL_NAMES = TopicShape(
    "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"
)  # fmt: skip
LIST_OFFSETS = dataclasses.replace(_USUAL_NAMES, error_fields=(("timestamp", -1), ("offset", -1)))
DELETE_RECORDS = dataclasses.replace(_USUAL_NAMES, error_fields=(("low_watermark", -1),))
LEADER_EPOCH = TopicShape(
    "topics", "topic", "partitions", "partition", "topics", "topic", "partitions", "partition",
    (("leader_epoch", -1), ("end_offset", -1)),
)  # fmt: skip
PRODUCERS = TopicShape(
    "topics", "name", "partition_indexes", None, "topics", "name", "partitions", "partition_index",
    (("active_producers", []),),
)  # fmt: skip
OFFSET_COMMIT = _USUAL_NAMES
OFFSET_DELETE = OFFSET_COMMIT


class GroupRequest(Protocol):
    """What the rules of the APIs about one group read (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
    ConsumerGroupHeartbeat, AlterShareGroupOffsets, DeleteShareGroupOffsets)."""

    @property
    def group_id(self) -> str: ...


class GroupTopicsRequest(GroupRequest, TopicsRequest, Protocol):
    """OffsetCommit and OffsetDelete: the group and the topics."""


class ConfigResourcesRequest(Protocol):
    """DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: the resources."""

    @property
    def resources(self) -> Sequence[ConfigResource]: ...


def topics_rule(shape: TopicShape, operation: Operation) -> Rule:
    async def rule(check: Check, ctx: RequestContext, request: TopicsRequest, call: Call) -> Response:
        return await split_topics(
            shape,
            check,
            lambda name: check.topic(operation, name),
            TOPIC_DENIED,
            ctx,
            request,
            request.topics,
            call,
        )

    return rule


async def produce(check: Check, ctx: RequestContext, request: ProduceRequest, call: Call) -> Response:
    txn, topics, unanswered = request.transactional_id, request.topic_data, request.acks == 0
    if txn is not None and not check.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
        return await answer_split(PRODUCE, TXN_DENIED, ctx, request, call, [], list(topics), unanswered)
    return await split_topics(
        PRODUCE,
        check,
        lambda name: check.topic(Operation.WRITE, name),
        TOPIC_DENIED,
        ctx,
        request,
        topics,
        call,
        unanswered,
    )


async def fetch(check: Check, ctx: RequestContext, request: TopicsRequest, call: Call) -> Response:
    shape = FETCH_BY_ID if ctx.api_version >= 13 else FETCH_BY_NAME
    return await topics_rule(shape, Operation.READ)(check, ctx, request, call)


async def init_producer_id(check: Check, ctx: RequestContext, request: object, call: Call) -> Response:
    txn = read_message(InitProducerIdRequest, request).transactional_id
    if txn is not None:
        if not check.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
            return {"throttle_time": 0, "error_code": TXN_DENIED, "producer_id": -1, "producer_epoch": -1}
    elif not (
        check.cluster(Operation.IDEMPOTENT_WRITE)
        or check.authorizer.authorize_any(check.principal, check.host, Operation.WRITE, ResourceType.TOPIC)
    ):
        return {"throttle_time": 0, "error_code": CLUSTER_DENIED, "producer_id": -1, "producer_epoch": -1}
    return await call(request)


# --- metadata ------------------------------------------------------------------------------------


async def metadata(check: Check, ctx: RequestContext, request: MetadataRequest, call: Call) -> Response:
    """DESCRIBE per topic: a listing of all topics leaves out the hidden ones, a named topic the
    principal may not see is answered TOPIC_AUTHORIZATION_FAILED, and auto-creation needs CREATE."""
    version = ctx.api_version
    requested = request.topics
    refused: list[dict[str, Any]] = []
    if requested is not None:
        passed = []
        for wanted in requested:
            name: str | None = wanted.name
            topic_id = topic_id_of(wanted, version)
            if name is None and topic_id is not None:
                topic = check.broker.topics.by_id(topic_id)
                name = topic.name if topic is not None else None
            if name is None:
                passed.append(wanted)
                continue
            exists = check.broker.topics.get(name) is not None
            creates = not exists and allows_auto_creation(request, version)
            if not check.topic(Operation.DESCRIBE, name) or (creates and not _may_create(check, name)):
                refused.append(_metadata_error(name, topic_id, TOPIC_DENIED))
            else:
                passed.append(wanted)
        # An empty list means "no topics" (not "all"): the handler still answers brokers and cluster.
        request = narrowed(request, topics=tuple(passed))
    response = await call(request)
    if not isinstance(response, dict):
        return response
    topics = [
        entry
        for entry in response.get("topics", [])
        if entry.get("name") is None or check.topic(Operation.DESCRIBE, entry["name"])
    ]
    if asks_topic_operations(request, version):
        for entry in topics:
            if entry.get("name") is not None and entry.get("error_code", ErrorCode.none) is ErrorCode.none:
                entry["topic_authorized_operations"] = check.operations(ResourceType.TOPIC, entry["name"])
    cluster_ops = NOT_REQUESTED
    if asks_cluster_operations(request, version):
        cluster_ops = check.operations(ResourceType.CLUSTER, CLUSTER_NAME)
    return {**response, "topics": [*topics, *refused], "cluster_authorized_operations": cluster_ops}


def _may_create(check: Check, name: str) -> bool:
    return check.cluster(Operation.CREATE) or check.topic(Operation.CREATE, name)


def _metadata_error(name: str, topic_id: uuid.UUID | None, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": NOT_REQUESTED,
    }


async def describe_cluster(
    check: Check, ctx: RequestContext, request: DescribeClusterRequest, call: Call
) -> Response:
    response = await call(request)
    if isinstance(response, dict) and request.include_cluster_authorized_operations:
        return {
            **response,
            "cluster_authorized_operations": check.operations(ResourceType.CLUSTER, CLUSTER_NAME),
        }
    return response


async def describe_topic_partitions(
    check: Check, ctx: RequestContext, request: DescribeTopicPartitionsRequest, call: Call
) -> Response:
    passed = [t for t in request.topics if check.topic(Operation.DESCRIBE, t.name)]
    refused = [
        {
            "error_code": TOPIC_DENIED,
            "name": t.name,
            "partitions": [],
            "topic_authorized_operations": NOT_REQUESTED,
        }
        for t in request.topics
        if not check.topic(Operation.DESCRIBE, t.name)
    ]
    if refused and not passed and request.topics:
        return {"throttle_time": 0, "topics": refused, "next_cursor": None}
    response = await call(narrowed(request, topics=tuple(passed)) if refused else request)
    if not isinstance(response, dict):
        return response
    topics = [e for e in response.get("topics", []) if check.topic(Operation.DESCRIBE, e["name"])]
    for entry in topics:
        if entry.get("error_code", ErrorCode.none) is ErrorCode.none:
            entry["topic_authorized_operations"] = check.operations(ResourceType.TOPIC, entry["name"])
    return {**response, "topics": [*topics, *refused]}


# --- topic administration ------------------------------------------------------------------------


async def create_topics(
    check: Check, ctx: RequestContext, request: CreateTopicsRequest, call: Call
) -> Response:
    may = check.cluster(Operation.CREATE)
    passed = [t for t in request.topics if may or check.topic(Operation.CREATE, t.name)]
    refused = [
        {"name": t.name, "error_code": TOPIC_DENIED, "error_message": "Authorization failed.",
         "num_partitions": -1, "replication_factor": -1, "topic_config_error_code": TOPIC_DENIED}
        for t in request.topics
        if t not in passed
    ]  # fmt: skip
    return await _split_list(request, "topics", passed, refused, "topics", call)


async def delete_topics(
    check: Check, ctx: RequestContext, request: DeleteTopicNamesRequest | DeleteTopicStatesRequest, call: Call
) -> Response:
    if ctx.api_version < TOPIC_STATES_SINCE:  # v1-5 send names only
        names = list(cast(DeleteTopicNamesRequest, request).topic_names)
        passed_names = [n for n in names if check.topic(Operation.DELETE, n)]
        refused = [{"name": n, "error_code": TOPIC_DENIED} for n in names if n not in passed_names]
        return await _split_list(request, "topic_names", passed_names, refused, "responses", call)
    passed, refused = [], []
    for entry in cast(DeleteTopicStatesRequest, request).topics:
        name: str | None = entry.name
        if name is None and entry.topic_id is not None:
            found = check.broker.topics.by_id(entry.topic_id)
            name = found.name if found is not None else None
        if name is None or check.topic(Operation.DELETE, name):
            passed.append(entry)
        else:
            refused.append({"name": entry.name, "topic_id": entry.topic_id, "error_code": TOPIC_DENIED})
    return await _split_list(request, "topics", passed, refused, "responses", call)


async def create_partitions(
    check: Check, ctx: RequestContext, request: CreatePartitionsRequest, call: Call
) -> Response:
    passed = [t for t in request.topics if check.topic(Operation.ALTER, t.name)]
    refused = [
        {"name": t.name, "error_code": TOPIC_DENIED, "error_message": None}
        for t in request.topics
        if t not in passed
    ]
    return await _split_list(request, "topics", passed, refused, "results", call)


async def _split_list(
    request: object,
    request_key: str,
    passed: Sequence[object],
    refused: list[dict[str, Any]],
    response_key: str,
    call: Call,
) -> Response:
    if not refused:
        return await call(request)
    if not passed:
        return {"throttle_time": 0, response_key: refused}
    response = await call(narrowed(request, **{request_key: tuple(passed)}))
    if isinstance(response, dict):
        return {**response, response_key: [*response.get(response_key, []), *refused]}
    return response


# --- configs -------------------------------------------------------------------------------------

_TOPIC_RESOURCE, _BROKER_RESOURCE, _BROKER_LOGGER_RESOURCE, _GROUP_RESOURCE = 2, 4, 8, 32


def configs_rule(operation: Operation, response_key: str) -> Rule:
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: a topic needs the operation on
    the topic, a broker (or its loggers) on the cluster, a group on the group."""

    def allowed(check: Check, resource: ConfigResource) -> tuple[bool, ErrorCode]:
        kind = int(resource.resource_type)
        if kind == _TOPIC_RESOURCE:
            return check.topic(operation, resource.resource_name), TOPIC_DENIED
        if kind == _GROUP_RESOURCE:
            return check.group(operation, resource.resource_name), GROUP_DENIED
        return check.cluster(operation), CLUSTER_DENIED

    async def rule(
        check: Check, ctx: RequestContext, request: ConfigResourcesRequest, call: Call
    ) -> Response:
        passed: list[ConfigResource] = []
        refused: list[dict[str, Any]] = []
        for resource in request.resources:
            ok, code = allowed(check, resource)
            if ok:
                passed.append(resource)
            else:
                refused.append(
                    {"error_code": code, "error_message": None, "resource_type": resource.resource_type,
                     "resource_name": resource.resource_name, "configs": []}
                )  # fmt: skip
        if response_key == "responses":
            for entry in refused:
                del entry["configs"]
        return await _split_list(request, "resources", passed, refused, response_key, call)

    return rule


# --- consumer groups -----------------------------------------------------------------------------


def group_rule(operation: Operation, **refusal: Any) -> Rule:
    """APIs about one group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): all or nothing."""

    async def rule(check: Check, ctx: RequestContext, request: GroupRequest, call: Call) -> Response:
        if check.group(operation, request.group_id):
            return await call(request)
        return {"throttle_time": 0, "error_code": GROUP_DENIED, **refusal}

    return rule


async def offset_commit(
    check: Check, ctx: RequestContext, request: GroupTopicsRequest, call: Call
) -> Response:
    if not check.group(Operation.READ, request.group_id):
        return await answer_split(OFFSET_COMMIT, GROUP_DENIED, ctx, request, call, [], list(request.topics))
    return await topics_rule(OFFSET_COMMIT, Operation.READ)(check, ctx, request, call)


async def offset_delete(
    check: Check, ctx: RequestContext, request: OffsetDeleteRequest, call: Call
) -> Response:
    if not check.group(Operation.DELETE, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED, "topics": []}
    return await topics_rule(OFFSET_DELETE, Operation.READ)(check, ctx, request, call)


async def offset_fetch(
    check: Check, ctx: RequestContext, request: OneGroupOffsetFetch | GroupsOffsetFetch, call: Call
) -> Response:
    """DESCRIBE on each group; committed offsets of topics the principal may not DESCRIBE are left
    out of an all-topics answer and refused when named."""
    if ctx.api_version < BATCHED_FETCH_SINCE:  # v1-7: one group
        if not check.group(Operation.DESCRIBE, cast(OneGroupOffsetFetch, request).group_id):
            return {"throttle_time": 0, "error_code": GROUP_DENIED, "topics": []}
        response = await call(request)
        if isinstance(response, dict):
            response = {**response, "topics": _visible_offsets(check, response.get("topics", []))}
        return response
    groups = cast(GroupsOffsetFetch, request).groups
    passed = [g for g in groups if check.group(Operation.DESCRIBE, g.group_id)]
    refused = [
        {"group_id": g.group_id, "error_code": GROUP_DENIED, "topics": []} for g in groups if g not in passed
    ]
    response = await _split_list(request, "groups", passed, refused, "groups", call)
    if isinstance(response, dict):
        for entry in response.get("groups", []):
            entry["topics"] = _visible_offsets(check, entry.get("topics", []))
    return response


def _visible_offsets(check: Check, topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    visible = []
    for entry in topics:
        if check.topic(Operation.DESCRIBE, entry["name"]):
            visible.append(entry)
        else:
            partitions = [
                {**p, "committed_offset": -1, "metadata": None, "error_code": TOPIC_DENIED}
                for p in entry.get("partitions", [])
            ]
            visible.append({**entry, "partitions": partitions})
    return visible


async def describe_groups(check: Check, ctx: RequestContext, request: object, call: Call) -> Response:
    asked = read_message(DescribeGroupsRequest, request)
    passed = [g for g in asked.groups if check.group(Operation.DESCRIBE, g)]
    refused = [
        {"error_code": GROUP_DENIED, "group_id": g, "group_state": "", "protocol_type": "",
         "protocol_data": "", "members": [], "authorized_operations": NOT_REQUESTED}
        for g in asked.groups
        if g not in passed
    ]  # fmt: skip
    response = await _split_list(request, "groups", passed, refused, "groups", call)
    if isinstance(response, dict) and asked.include_authorized_operations:
        for entry in response.get("groups", []):
            if entry.get("error_code") is not GROUP_DENIED:
                entry["authorized_operations"] = check.operations(ResourceType.GROUP, entry["group_id"])
    return response


async def consumer_group_describe(
    check: Check, ctx: RequestContext, request: GroupsDescription, call: Call
) -> Response:
    """ConsumerGroupDescribe (KIP-848): DESCRIBE on each group, as DescribeGroups."""
    passed = [g for g in request.group_ids if check.group(Operation.DESCRIBE, g)]
    refused = [
        {"error_code": GROUP_DENIED, "group_id": g, "group_state": "", "group_epoch": -1,
         "assignment_epoch": -1, "assignor_name": "", "members": [], "authorized_operations": NOT_REQUESTED}
        for g in request.group_ids
        if g not in passed
    ]  # fmt: skip
    return await _split_list(request, "group_ids", passed, refused, "groups", call)


async def list_groups(check: Check, ctx: RequestContext, request: object, call: Call) -> Response:
    response = await call(request)
    if isinstance(response, dict) and not check.cluster(Operation.DESCRIBE):
        groups = [g for g in response.get("groups", []) if check.group(Operation.DESCRIBE, g["group_id"])]
        response = {**response, "groups": groups}
    return response


async def delete_groups(
    check: Check, ctx: RequestContext, request: DeleteGroupsRequest, call: Call
) -> Response:
    passed = [g for g in request.groups_names if check.group(Operation.DELETE, g)]
    refused = [{"group_id": g, "error_code": GROUP_DENIED} for g in request.groups_names if g not in passed]
    return await _split_list(request, "groups_names", passed, refused, "results", call)


async def find_coordinator(check: Check, ctx: RequestContext, request: object, call: Call) -> Response:
    """DESCRIBE on the group, or on the transactional id for key type 1."""
    asked = read_message(FindCoordinatorRequest, request)
    kind = ResourceType.TRANSACTIONAL_ID if asked.key_type == TRANSACTION_KEY else ResourceType.GROUP
    code = TXN_DENIED if kind is ResourceType.TRANSACTIONAL_ID else GROUP_DENIED
    keys = asked.coordinator_keys
    if ctx.api_version < COORDINATOR_KEYS_SINCE:  # v0-3: one key
        if check.allowed(Operation.DESCRIBE, kind, asked.key):
            return await call(request)
        return {"throttle_time": 0, "error_code": code, "node_id": -1, "host": "", "port": -1}
    passed = [k for k in keys if check.allowed(Operation.DESCRIBE, kind, k)]
    refused = [
        {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": None}
        for k in keys
        if k not in passed
    ]
    return await _split_list(request, "coordinator_keys", passed, refused, "coordinators", call)


# --- transactions --------------------------------------------------------------------------------


def transaction_rule(**refusal: Any) -> Rule:
    """AddOffsetsToTxn, EndTxn: WRITE on the transactional id."""

    async def rule(check: Check, ctx: RequestContext, request: ProducerRequest, call: Call) -> Response:
        if check.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return await call(request)
        return {"throttle_time": 0, "error_code": TXN_DENIED, **refusal}

    return rule


def _partition_results(
    topics: Any, code_of: Callable[[str], ErrorCode], partitions_key: str, code_key: str
) -> list[dict[str, Any]]:
    """Every partition of ``topics`` answered with its topic's code."""
    return [
        {
            "name": topic.name,
            partitions_key: [
                {"partition_index": int(getattr(p, "partition_index", p)), code_key: code_of(topic.name)}
                for p in topic.partitions
            ],
        }
        for topic in topics
    ]


async def add_partitions_to_txn(
    check: Check, ctx: RequestContext, request: AddPartitionsToTxnRequest, call: Call
) -> Response:
    """As Kafka: without WRITE on the transactional id every partition is refused with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED; else a topic without WRITE gets TOPIC_AUTHORIZATION_FAILED,
    an unknown one UNKNOWN_TOPIC_OR_PARTITION, and then nothing is added: the rest are answered
    OPERATION_NOT_ATTEMPTED (v0-3, the clients' form)."""
    topics: list[AddPartitionsToTxnTopic] = list(request.v3_and_below_topics)
    if not check.allowed(
        Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id
    ):
        codes: dict[str, ErrorCode] = {t.name: TXN_DENIED for t in topics}
    else:
        codes = {}
        for topic in topics:
            if not check.topic(Operation.WRITE, topic.name):
                codes[topic.name] = TOPIC_DENIED
            elif check.broker.topics.get(topic.name) is None:
                codes[topic.name] = ErrorCode.unknown_topic_or_partition
        if not codes:
            return await call(request)
        codes = {t.name: codes.get(t.name, ErrorCode.operation_not_attempted) for t in topics}
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "results_by_transaction": [],
        "results_by_topic_v3_and_below": _partition_results(
            topics, codes.__getitem__, "results_by_partition", "partition_error_code"
        ),
    }


async def txn_offset_commit(
    check: Check, ctx: RequestContext, request: TxnOffsetCommitScope, call: Call
) -> Response:
    """WRITE on the transactional id, then READ on the group (all partitions refused with the
    one's error), then READ per topic: refused topics are answered TOPIC_AUTHORIZATION_FAILED and
    the others committed, as Kafka does."""
    if not check.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        code: ErrorCode | None = TXN_DENIED
    elif not check.group(Operation.READ, request.group_id):
        code = GROUP_DENIED
    else:
        code = None
    if code is not None:
        refused = _partition_results(request.topics, lambda _: code, "partitions", "error_code")
        return {"throttle_time": 0, "topics": refused}
    passed = [t for t in request.topics if check.topic(Operation.READ, t.name)]
    denied = [t for t in request.topics if t not in passed]
    refused = _partition_results(denied, lambda _: TOPIC_DENIED, "partitions", "error_code")
    return await _split_list(request, "topics", passed, refused, "topics", call)


async def describe_transactions(
    check: Check, ctx: RequestContext, request: DescribeTransactionsRequest, call: Call
) -> Response:
    """DESCRIBE per transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it); the
    partitions of a described transaction only in topics the principal may DESCRIBE."""
    ids = list(request.transactional_ids)
    passed = [i for i in ids if check.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, i)]
    refused = [
        {"error_code": TXN_DENIED, "transactional_id": i, "transaction_state": "", "transaction_timeout": 0,
         "transaction_start_time": 0, "producer_id": -1, "producer_epoch": -1, "topics": []}
        for i in ids
        if i not in passed
    ]  # fmt: skip
    response = await _split_list(request, "transactional_ids", passed, refused, "transaction_states", call)
    if isinstance(response, dict):
        for state in response.get("transaction_states", []):
            state["topics"] = [
                t for t in state.get("topics", []) if check.topic(Operation.DESCRIBE, t["topic"])
            ]
    return response


async def list_transactions(check: Check, ctx: RequestContext, request: object, call: Call) -> Response:
    """Only the transactional ids the principal may DESCRIBE are listed (Kafka checks no more)."""
    response = await call(request)
    if isinstance(response, dict):
        listed = [
            t
            for t in response.get("transaction_states", [])
            if check.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"])
        ]
        response = {**response, "transaction_states": listed}
    return response


# --- everything on the cluster -------------------------------------------------------------------


async def write_txn_markers(
    check: Check, ctx: RequestContext, request: WriteTxnMarkersRequest, call: Call
) -> Response:
    """WriteTxnMarkers is for brokers (CLUSTER_ACTION, as in Kafka); refused, every partition of
    every marker says CLUSTER_AUTHORIZATION_FAILED (the response has no top-level error)."""
    if check.cluster(Operation.CLUSTER_ACTION):
        return await call(request)
    # A plain dict, as every answer the guard passes on: quotas and rules edit answers in place.
    return dict(write_txn_markers_answer(request, itertools.repeat(CLUSTER_DENIED)))


def _refused_entries(entries: Sequence[object], **extra: Any) -> list[dict[str, Any]]:
    """One CLUSTER_AUTHORIZATION_FAILED answer per entry, for APIs without a top-level error."""
    return [
        {"error_code": CLUSTER_DENIED, "error_message": "Authorization failed.", **extra} for _ in entries
    ]


def _acl_creation_errors(request: CreateAclsRequest) -> dict[str, Any]:
    return {"results": _refused_entries(request.creations)}


def _acl_deletion_errors(request: DeleteAclsRequest) -> dict[str, Any]:
    return {"filter_results": _refused_entries(request.filters, matching_acls=[])}


def _election_errors(request: ElectLeadersRequest) -> dict[str, Any]:
    """As Kafka: the refusal at the top (v1 on) and on each partition asked for (none when the
    request asks for every partition)."""
    refused = {"error_code": CLUSTER_DENIED, "error_message": "Cluster authorization failed."}
    return {
        "error_code": CLUSTER_DENIED,
        "replica_election_results": [
            {"topic": t.topic, "partition_result": [{"partition_id": p, **refused} for p in t.partitions]}
            for t in request.topic_partitions or ()
        ],
    }


def _log_dir_errors(request: AlterReplicaLogDirsRequest) -> dict[str, Any]:
    return {
        "results": [
            {
                "topic_name": t.name,
                "partitions": [{"partition_index": p, "error_code": CLUSTER_DENIED} for p in t.partitions],
            }
            for d in request.dirs
            for t in d.topics
        ]
    }


def _scram_errors(request: AlterUserScramCredentialsRequest) -> dict[str, Any]:
    users = dict.fromkeys([*(d.name for d in request.deletions), *(u.name for u in request.upsertions)])
    return {"results": [{"user": u, "error_code": CLUSTER_DENIED, "error_message": None} for u in users]}


RULES: dict[int, Rule] = {
    0: produce,
    1: fetch,
    2: topics_rule(LIST_OFFSETS, Operation.DESCRIBE),
    3: metadata,
    8: offset_commit,
    9: offset_fetch,
    10: find_coordinator,
    11: group_rule(Operation.READ, generation_id=-1, member_id="", leader="", members=[]),
    12: group_rule(Operation.READ),
    13: group_rule(Operation.READ, members=[]),
    14: group_rule(Operation.READ, assignment=b""),
    15: describe_groups,
    16: list_groups,
    18: lambda check, ctx, request, call: call(request),  # ApiVersions: always
    19: create_topics,
    20: delete_topics,
    21: topics_rule(DELETE_RECORDS, Operation.DELETE),
    22: init_producer_id,
    23: topics_rule(LEADER_EPOCH, Operation.DESCRIBE),
    24: add_partitions_to_txn,
    25: transaction_rule(),
    26: transaction_rule(),
    27: write_txn_markers,
    28: txn_offset_commit,
    29: cluster_rule(Operation.DESCRIBE),
    30: cluster_rule(Operation.ALTER, _acl_creation_errors),
    31: cluster_rule(Operation.ALTER, _acl_deletion_errors),
    32: configs_rule(Operation.DESCRIBE_CONFIGS, "results"),
    33: configs_rule(Operation.ALTER_CONFIGS, "responses"),
    34: cluster_rule(Operation.ALTER, _log_dir_errors),
    35: cluster_rule(Operation.DESCRIBE, lambda request: {"error_code": CLUSTER_DENIED, "results": []}),
    37: create_partitions,
    42: delete_groups,
    43: cluster_rule(Operation.ALTER, _election_errors),
    44: configs_rule(Operation.ALTER_CONFIGS, "responses"),
    45: cluster_rule(Operation.ALTER),
    46: cluster_rule(Operation.DESCRIBE),
    47: offset_delete,
    48: cluster_rule(Operation.DESCRIBE_CONFIGS),
    49: cluster_rule(Operation.ALTER_CONFIGS, lambda request: {"entries": []}),
    50: cluster_rule(Operation.DESCRIBE),
    51: cluster_rule(Operation.ALTER, _scram_errors),
    55: cluster_rule(Operation.DESCRIBE, throttled=False),  # DescribeQuorum has no throttle time
    60: describe_cluster,
    61: topics_rule(PRODUCERS, Operation.READ),
    64: cluster_rule(Operation.ALTER),  # UnregisterBroker
    65: describe_transactions,
    66: list_transactions,
    75: describe_topic_partitions,
    68: group_rule(Operation.READ, member_epoch=-1, heartbeat_interval=0),  # ConsumerGroupHeartbeat
    69: consumer_group_describe,
    76: share_rules.share_group_heartbeat,
    77: consumer_group_describe,  # ShareGroupDescribe: the same answer shape
    78: share_rules.share_records,  # ShareFetch
    79: share_rules.share_records,  # ShareAcknowledge
    90: share_rules.describe_share_group_offsets,
    91: share_rules.share_offsets_change(Operation.READ),  # AlterShareGroupOffsets
    92: share_rules.share_offsets_change(Operation.DELETE),  # DeleteShareGroupOffsets
}
