"""Which ACL each Kafka API needs, following Kafka's request handlers (``KafkaApis``): topic data
APIs check each topic, group APIs the group, admin APIs the topic or the cluster; refusals go where
that part's answer goes, with Kafka's error code."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from tabletopic.broker.security.guard import (
    NOT_REQUESTED,
    Call,
    Check,
    Response,
    Rule,
    TopicShape,
    answer_split,
    cluster_rule,
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
FETCH_BY_NAME = TopicShape(
    "topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index",
    (("high_watermark", -1), ("last_stable_offset", -1), ("log_start_offset", -1)),
    (("error_code", ErrorCode.none), ("session_id", 0)),
)  # fmt: skip
FETCH_BY_ID = TopicShape(
    "topics", "topic_id", "partitions", "partition", "responses", "topic_id", "partitions", "partition_index",
    FETCH_BY_NAME.error_fields, FETCH_BY_NAME.top_fields,
)  # fmt: skip
LIST_OFFSETS = TopicShape(
    "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
    (("timestamp", -1), ("offset", -1)),
)  # fmt: skip
DELETE_RECORDS = TopicShape(
    "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
    (("low_watermark", -1),),
)  # fmt: skip
LEADER_EPOCH = TopicShape(
    "topics", "topic", "partitions", "partition", "topics", "topic", "partitions", "partition",
    (("leader_epoch", -1), ("end_offset", -1)),
)  # fmt: skip
PRODUCERS = TopicShape(
    "topics", "name", "partition_indexes", None, "topics", "name", "partitions", "partition_index",
    (("active_producers", []),),
)  # fmt: skip
OFFSET_COMMIT = TopicShape(
    "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"
)  # fmt: skip
OFFSET_DELETE = OFFSET_COMMIT


def topics_rule(shape: TopicShape, operation: Operation) -> Rule:
    async def rule(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
        return await split_topics(
            shape, check, lambda name: check.topic(operation, name), TOPIC_DENIED, ctx, request, call
        )

    return rule


async def produce(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    txn = getattr(request, "transactional_id", None)
    if txn is not None and not check.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
        return await answer_split(PRODUCE, TXN_DENIED, ctx, request, call, [], list(request.topic_data))
    return await topics_rule(PRODUCE, Operation.WRITE)(check, ctx, request, call)


async def fetch(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    shape = FETCH_BY_ID if ctx.api_version >= 13 else FETCH_BY_NAME
    return await topics_rule(shape, Operation.READ)(check, ctx, request, call)


async def init_producer_id(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    txn = getattr(request, "transactional_id", None)
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


async def metadata(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    """DESCRIBE per topic: a listing of all topics leaves out the hidden ones, a named topic the
    principal may not see is answered TOPIC_AUTHORIZATION_FAILED, and auto-creation needs CREATE."""
    requested = request.topics
    refused: list[dict[str, Any]] = []
    if requested is not None:
        passed = []
        for wanted in requested:
            name = wanted.name
            if name is None and getattr(wanted, "topic_id", None) is not None:
                topic = check.broker.topics.by_id(wanted.topic_id)
                name = topic.name if topic is not None else None
            if name is None:
                passed.append(wanted)
                continue
            exists = check.broker.topics.get(name) is not None
            creates = not exists and request.allow_auto_topic_creation
            if not check.topic(Operation.DESCRIBE, name) or (creates and not _may_create(check, name)):
                refused.append(_metadata_error(name, wanted, TOPIC_DENIED))
            else:
                passed.append(wanted)
        # An empty list means "no topics" (not "all"): the handler still answers brokers and cluster.
        request = dataclasses.replace(request, topics=tuple(passed))
    response = await call(request)
    if not isinstance(response, dict):
        return response
    topics = [
        entry
        for entry in response.get("topics", [])
        if entry.get("name") is None or check.topic(Operation.DESCRIBE, entry["name"])
    ]
    if getattr(request, "include_topic_authorized_operations", False):
        for entry in topics:
            if entry.get("name") is not None and entry.get("error_code", ErrorCode.none) is ErrorCode.none:
                entry["topic_authorized_operations"] = check.operations(ResourceType.TOPIC, entry["name"])
    cluster_ops = NOT_REQUESTED
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_ops = check.operations(ResourceType.CLUSTER, CLUSTER_NAME)
    return {**response, "topics": [*topics, *refused], "cluster_authorized_operations": cluster_ops}


def _may_create(check: Check, name: str) -> bool:
    return check.cluster(Operation.CREATE) or check.topic(Operation.CREATE, name)


def _metadata_error(name: str, wanted: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": getattr(wanted, "topic_id", None),
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": NOT_REQUESTED,
    }


async def describe_cluster(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    response = await call(request)
    if isinstance(response, dict) and getattr(request, "include_cluster_authorized_operations", False):
        return {
            **response,
            "cluster_authorized_operations": check.operations(ResourceType.CLUSTER, CLUSTER_NAME),
        }
    return response


async def describe_topic_partitions(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
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
    response = await call(dataclasses.replace(request, topics=tuple(passed)) if refused else request)
    if not isinstance(response, dict):
        return response
    topics = [e for e in response.get("topics", []) if check.topic(Operation.DESCRIBE, e["name"])]
    for entry in topics:
        if entry.get("error_code", ErrorCode.none) is ErrorCode.none:
            entry["topic_authorized_operations"] = check.operations(ResourceType.TOPIC, entry["name"])
    return {**response, "topics": [*topics, *refused]}


# --- topic administration ------------------------------------------------------------------------


async def create_topics(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    may = check.cluster(Operation.CREATE)
    passed = [t for t in request.topics if may or check.topic(Operation.CREATE, t.name)]
    refused = [
        {"name": t.name, "error_code": TOPIC_DENIED, "error_message": "Authorization failed.",
         "num_partitions": -1, "replication_factor": -1, "topic_config_error_code": TOPIC_DENIED}
        for t in request.topics
        if t not in passed
    ]  # fmt: skip
    return await _split_list(request, "topics", passed, refused, "topics", call)


async def delete_topics(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    entries = getattr(request, "topics", None)
    if entries is None:  # v0-5 send names only
        names = list(request.topic_names)
        passed_names = [n for n in names if check.topic(Operation.DELETE, n)]
        refused = [{"name": n, "error_code": TOPIC_DENIED} for n in names if n not in passed_names]
        return await _split_list(request, "topic_names", passed_names, refused, "responses", call)
    passed, refused = [], []
    for entry in entries:
        name = entry.name
        if name is None and entry.topic_id is not None:
            found = check.broker.topics.by_id(entry.topic_id)
            name = found.name if found is not None else None
        if name is None or check.topic(Operation.DELETE, name):
            passed.append(entry)
        else:
            refused.append({"name": entry.name, "topic_id": entry.topic_id, "error_code": TOPIC_DENIED})
    return await _split_list(request, "topics", passed, refused, "responses", call)


async def create_partitions(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    passed = [t for t in request.topics if check.topic(Operation.ALTER, t.name)]
    refused = [
        {"name": t.name, "error_code": TOPIC_DENIED, "error_message": None}
        for t in request.topics
        if t not in passed
    ]
    return await _split_list(request, "topics", passed, refused, "results", call)


async def _split_list(
    request: Any,
    request_key: str,
    passed: list[Any],
    refused: list[dict[str, Any]],
    response_key: str,
    call: Call,
) -> Response:
    if not refused:
        return await call(request)
    if not passed:
        return {"throttle_time": 0, response_key: refused}
    response = await call(dataclasses.replace(request, **{request_key: tuple(passed)}))
    if isinstance(response, dict):
        return {**response, response_key: [*response.get(response_key, []), *refused]}
    return response


# --- configs -------------------------------------------------------------------------------------

_TOPIC_RESOURCE, _BROKER_RESOURCE, _BROKER_LOGGER_RESOURCE, _GROUP_RESOURCE = 2, 4, 8, 32


def configs_rule(operation: Operation, response_key: str) -> Rule:
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: a topic needs the operation on
    the topic, a broker (or its loggers) on the cluster, a group on the group."""

    def allowed(check: Check, resource: Any) -> tuple[bool, ErrorCode]:
        kind = int(resource.resource_type)
        if kind == _TOPIC_RESOURCE:
            return check.topic(operation, resource.resource_name), TOPIC_DENIED
        if kind == _GROUP_RESOURCE:
            return check.group(operation, resource.resource_name), GROUP_DENIED
        return check.cluster(operation), CLUSTER_DENIED

    async def rule(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
        passed, refused = [], []
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

    async def rule(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
        if check.group(operation, request.group_id):
            return await call(request)
        return {"throttle_time": 0, "error_code": GROUP_DENIED, **refusal}

    return rule


async def offset_commit(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    if not check.group(Operation.READ, request.group_id):
        return await answer_split(OFFSET_COMMIT, GROUP_DENIED, ctx, request, call, [], list(request.topics))
    return await topics_rule(OFFSET_COMMIT, Operation.READ)(check, ctx, request, call)


async def offset_delete(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    if not check.group(Operation.DELETE, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED, "topics": []}
    return await topics_rule(OFFSET_DELETE, Operation.READ)(check, ctx, request, call)


async def offset_fetch(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    """DESCRIBE on each group; committed offsets of topics the principal may not DESCRIBE are left
    out of an all-topics answer and refused when named."""
    groups = getattr(request, "groups", None)
    if groups is None:  # v0-7: one group
        if not check.group(Operation.DESCRIBE, request.group_id):
            return {"throttle_time": 0, "error_code": GROUP_DENIED, "topics": []}
        response = await call(request)
        if isinstance(response, dict):
            response = {**response, "topics": _visible_offsets(check, response.get("topics", []))}
        return response
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


async def describe_groups(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    passed = [g for g in request.groups if check.group(Operation.DESCRIBE, g)]
    refused = [
        {"error_code": GROUP_DENIED, "group_id": g, "group_state": "", "protocol_type": "",
         "protocol_data": "", "members": [], "authorized_operations": NOT_REQUESTED}
        for g in request.groups
        if g not in passed
    ]  # fmt: skip
    response = await _split_list(request, "groups", passed, refused, "groups", call)
    if isinstance(response, dict) and getattr(request, "include_authorized_operations", False):
        for entry in response.get("groups", []):
            if entry.get("error_code") is not GROUP_DENIED:
                entry["authorized_operations"] = check.operations(ResourceType.GROUP, entry["group_id"])
    return response


async def list_groups(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    response = await call(request)
    if isinstance(response, dict) and not check.cluster(Operation.DESCRIBE):
        groups = [g for g in response.get("groups", []) if check.group(Operation.DESCRIBE, g["group_id"])]
        response = {**response, "groups": groups}
    return response


async def delete_groups(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    passed = [g for g in request.groups_names if check.group(Operation.DELETE, g)]
    refused = [{"group_id": g, "error_code": GROUP_DENIED} for g in request.groups_names if g not in passed]
    return await _split_list(request, "groups_names", passed, refused, "results", call)


async def find_coordinator(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
    """DESCRIBE on the group, or on the transactional id for key type 1."""
    kind = ResourceType.TRANSACTIONAL_ID if int(getattr(request, "key_type", 0)) == 1 else ResourceType.GROUP
    code = TXN_DENIED if kind is ResourceType.TRANSACTIONAL_ID else GROUP_DENIED
    keys = getattr(request, "coordinator_keys", None)
    if keys is None:  # v0-3: one key
        if check.allowed(Operation.DESCRIBE, kind, request.key):
            return await call(request)
        return {"throttle_time": 0, "error_code": code, "node_id": -1, "host": "", "port": -1}
    passed = [k for k in keys if check.allowed(Operation.DESCRIBE, kind, k)]
    refused = [
        {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": None}
        for k in keys
        if k not in passed
    ]
    return await _split_list(request, "coordinator_keys", passed, refused, "coordinators", call)


# --- transactions (rules ready for the transaction APIs) -----------------------------------------


def transaction_rule(**refusal: Any) -> Rule:
    async def rule(check: Check, ctx: RequestContext, request: Any, call: Call) -> Response:
        if check.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return await call(request)
        return {"throttle_time": 0, "error_code": TXN_DENIED, **refusal}

    return rule


# --- everything on the cluster -------------------------------------------------------------------


def _per_entry(key: str, source: str, code: ErrorCode = CLUSTER_DENIED, **extra: Any) -> Any:
    def errors(request: Any) -> dict[str, Any]:
        return {
            key: [
                {"error_code": code, "error_message": "Authorization failed.", **extra}
                for _ in getattr(request, source)
            ]
        }

    return errors


def _scram_errors(request: Any) -> dict[str, Any]:
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
    25: transaction_rule(),
    26: transaction_rule(),
    29: cluster_rule(Operation.DESCRIBE),
    30: cluster_rule(Operation.ALTER, _per_entry("results", "creations")),
    31: cluster_rule(Operation.ALTER, _per_entry("filter_results", "filters", matching_acls=[])),
    32: configs_rule(Operation.DESCRIBE_CONFIGS, "results"),
    33: configs_rule(Operation.ALTER_CONFIGS, "responses"),
    35: cluster_rule(Operation.DESCRIBE, lambda request: {"error_code": CLUSTER_DENIED, "results": []}),
    37: create_partitions,
    42: delete_groups,
    43: cluster_rule(Operation.ALTER),
    44: configs_rule(Operation.ALTER_CONFIGS, "responses"),
    45: cluster_rule(Operation.ALTER),
    46: cluster_rule(Operation.DESCRIBE),
    47: offset_delete,
    48: cluster_rule(Operation.DESCRIBE_CONFIGS),
    49: cluster_rule(Operation.ALTER_CONFIGS, lambda request: {"entries": []}),
    50: cluster_rule(Operation.DESCRIBE),
    51: cluster_rule(Operation.ALTER, _scram_errors),
    55: cluster_rule(Operation.DESCRIBE),
    60: describe_cluster,
    61: topics_rule(PRODUCERS, Operation.READ),
    75: describe_topic_partitions,
}
