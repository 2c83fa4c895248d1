"""Kafka API handlers of the classic group protocol: parsed kio request in, response dict out.

Each handler resolves the per-version differences of its request (missing fields, v0 semantics) into
the version-free inputs of :class:`~tabletopic.broker.groups.coordinator.GroupCoordinator` and
describes the answer as a plain dict shaped like the NEWEST kio response version (nested entities as
dicts, error codes as :class:`ErrorCode`, durations as :class:`~datetime.timedelta`); the broker's
``build_response`` fits it to the version the client spoke.

Two APIs changed shape in a way one dict cannot express, so their handlers look at the version:

* FindCoordinator v0-3 answer one coordinator at the top level; v4+ answer ``coordinators[]`` for
  the batched ``coordinator_keys``.
* OffsetFetch v0-7 answer ``topics[]`` (and ``error_code``) at the top level for one group; v8+
  answer ``groups[]``.

Values (not shapes) also differ in two places: JoinGroup before v7 has a non-nullable protocol name
("" instead of null on errors), and LeaveGroup before v3 names one member and reports its error at the
top level.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.coordinator import GroupCoordinator, OffsetToCommit
from tabletopic.broker.groups.model import (
    GroupDescription,
    GroupState,
    JoinRequest,
    MemberIdentity,
    SyncRequest,
)
from tabletopic.broker.groups.store import CommittedOffset

Handler = Callable[[GroupCoordinator, RequestContext, Any], Awaitable[dict[str, Any]]]

_NO_THROTTLE = datetime.timedelta(0)
# DescribeGroups: "authorized operations not computed" (INT32_MIN), what Kafka sends when not asked.
_OPERATIONS_OMITTED = -(2**31)
# Without ACLs every principal may do everything a group supports: READ (3), DELETE (6), DESCRIBE (8),
# as bits of Kafka's AclOperation codes.
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
# The only group type this coordinator runs (KIP-848 "consumer" groups are not served).
_GROUP_TYPE = "classic"


def _version(request: Any) -> int:
    return int(type(request).__version__)


def _ms(value: datetime.timedelta) -> int:
    return int(value / datetime.timedelta(milliseconds=1))


_IPV4_WITH_PORT = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){3}):\d+$")


def _client_host(ctx: RequestContext) -> str:
    # Kafka reports hosts as InetAddress.toString() ("/127.0.0.1", no port); tools expect that form.
    host = ctx.client_host or ""
    match = _IPV4_WITH_PORT.match(host)
    if match is not None:
        host = match.group(1)
    return host if host.startswith("/") else f"/{host}"


# -------------------------------------------------------------------------------------------------
# FindCoordinator (10)


async def handle_find_coordinator(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    """This broker coordinates every group and (key type 1) every transactional id."""
    key_type = int(getattr(request, "key_type", 0))

    def answer(key: str) -> dict[str, Any]:
        if key_type not in (0, 1):
            return {
                "error_code": ErrorCode.invalid_request,
                "error_message": f"unsupported coordinator key type {key_type}",
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "node_id": coordinator.node_id,
            "host": coordinator.host,
            "port": coordinator.port,
        }

    if _version(request) >= 4:
        return {
            "throttle_time": _NO_THROTTLE,
            "coordinators": [{"key": key, **answer(key)} for key in request.coordinator_keys],
        }
    return {"throttle_time": _NO_THROTTLE, **answer(request.key)}


# -------------------------------------------------------------------------------------------------
# JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13)


async def handle_join_group(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    version = _version(request)
    session_timeout_ms = _ms(request.session_timeout)
    # v0 has no rebalance timeout: Kafka uses the session timeout for both.
    rebalance_timeout_ms = _ms(request.rebalance_timeout) if version >= 1 else session_timeout_ms
    result = await coordinator.join_group(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            client_id=ctx.client_id or "",
            client_host=_client_host(ctx),
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
            reason=getattr(request, "reason", None),
        )
    )
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # non-nullable before v7
    return {
        "throttle_time": _NO_THROTTLE,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in result.members
        ],
    }


async def handle_sync_group(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    result = await coordinator.sync_group(
        SyncRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            generation_id=int(request.generation_id),
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
        )
    )
    return {
        "throttle_time": _NO_THROTTLE,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


async def handle_heartbeat(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    error = await coordinator.heartbeat(
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        int(request.generation_id),
    )
    return {"throttle_time": _NO_THROTTLE, "error_code": error}


async def handle_leave_group(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    if _version(request) < 3:
        errors = await coordinator.leave_group(request.group_id, [MemberIdentity(request.member_id)])
        return {"throttle_time": _NO_THROTTLE, "error_code": errors[0], "members": []}
    identities = [
        MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in request.members
    ]
    if not coordinator.ready:
        return {
            "throttle_time": _NO_THROTTLE,
            "error_code": ErrorCode.coordinator_load_in_progress,
            "members": [],
        }
    errors = await coordinator.leave_group(request.group_id, identities)
    return {
        "throttle_time": _NO_THROTTLE,
        "error_code": ErrorCode.none,
        "members": [
            {"member_id": i.member_id, "group_instance_id": i.group_instance_id, "error_code": error}
            for i, error in zip(identities, errors, strict=True)
        ],
    }


# -------------------------------------------------------------------------------------------------
# DescribeGroups (15), ListGroups (16), DeleteGroups (42)


def _described(description: GroupDescription, operations: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_id": description.group_id,
        "group_state": description.state.value,
        "protocol_type": description.protocol_type,
        "protocol_data": description.protocol_name,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in description.members
        ],
        "authorized_operations": operations,
    }


async def handle_describe_groups(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    version = _version(request)
    operations = (
        _GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False) else _OPERATIONS_OMITTED
    )
    groups: list[dict[str, Any]] = []
    for group_id in request.groups:
        description = coordinator.describe_group(group_id)
        if not coordinator.ready:
            error, message = ErrorCode.coordinator_load_in_progress, None
        elif description is None and version >= 6:
            # v6 (KIP-1043) reports unknown groups as an error; older versions as a Dead group.
            error, message = ErrorCode.group_id_not_found, f"group {group_id} not found"
        elif description is None:
            error, message = ErrorCode.none, None
        else:
            groups.append(_described(description, operations))
            continue
        groups.append(
            {
                "error_code": error,
                "error_message": message,
                "group_id": group_id,
                "group_state": GroupState.DEAD.value,
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": _OPERATIONS_OMITTED,
            }
        )
    return {"throttle_time": _NO_THROTTLE, "groups": groups}


async def handle_list_groups(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    if not coordinator.ready:
        return {
            "throttle_time": _NO_THROTTLE,
            "error_code": ErrorCode.coordinator_load_in_progress,
            "groups": [],
        }
    # Both filters match case-insensitively, as Kafka's do.
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    if types and _GROUP_TYPE not in types:
        return {"throttle_time": _NO_THROTTLE, "error_code": ErrorCode.none, "groups": []}
    return {
        "throttle_time": _NO_THROTTLE,
        "error_code": ErrorCode.none,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state.value,
                "group_type": _GROUP_TYPE,
            }
            for g in coordinator.list_groups()
            if not states or g.state.value.lower() in states
        ],
    }


async def handle_delete_groups(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    results = await coordinator.delete_groups(request.groups_names)
    return {
        "throttle_time": _NO_THROTTLE,
        "results": [{"group_id": g, "error_code": results[g]} for g in dict.fromkeys(request.groups_names)],
    }


# -------------------------------------------------------------------------------------------------
# OffsetCommit (8), OffsetFetch (9), OffsetDelete (47)


async def handle_offset_commit(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    # v10 names topics by id only; this coordinator knows names, so those topics are unknown (the
    # broker advertises OffsetCommit up to v9).
    offsets = [
        OffsetToCommit(
            topic=topic.name,
            partition=int(p.partition_index),
            offset=int(p.committed_offset),
            leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
            metadata=p.committed_metadata,
        )
        for topic in request.topics
        if getattr(topic, "name", None) is not None
        for p in topic.partitions
    ]
    results = await coordinator.commit_offsets(
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        int(request.generation_id_or_member_epoch),
        offsets,
    )
    topics = []
    for topic in request.topics:
        name = getattr(topic, "name", None)
        topics.append(
            {
                "name": name,
                "topic_id": getattr(topic, "topic_id", None),
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.unknown_topic_id
                        if name is None
                        else results[(name, int(p.partition_index))],
                    }
                    for p in topic.partitions
                ],
            }
        )
    return {"throttle_time": _NO_THROTTLE, "topics": topics}


def _fetched_topics(
    fetched: Sequence[tuple[str, Sequence[tuple[int, CommittedOffset | None]]]], error: ErrorCode
) -> list[dict[str, Any]]:
    return [
        {
            "name": topic,
            "partitions": [
                {
                    "partition_index": partition,
                    "committed_offset": -1 if value is None else value.offset,
                    "committed_leader_epoch": -1 if value is None else value.leader_epoch,
                    # Kafka answers "" both for "no offset" and for a commit with null metadata.
                    "metadata": "" if value is None or value.metadata is None else value.metadata,
                    "error_code": error,
                }
                for partition, value in partitions
            ],
        }
        for topic, partitions in fetched
    ]


def _requested(topics: Any) -> list[tuple[str, Sequence[int]]] | None:
    if topics is None:
        return None  # v2+: null means every partition the group committed
    return [(t.name, [int(p) for p in t.partition_indexes]) for t in topics]


async def handle_offset_fetch(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    if _version(request) >= 8:
        groups = []
        for group in request.groups:
            error, fetched = coordinator.fetch_offsets(group.group_id, _requested(group.topics))
            groups.append(
                {
                    "group_id": group.group_id,
                    "error_code": error,
                    "topics": _fetched_topics(fetched, ErrorCode.none),
                }
            )
        return {"throttle_time": _NO_THROTTLE, "groups": groups}
    requested = _requested(request.topics)
    error, fetched = coordinator.fetch_offsets(request.group_id, requested)
    if error is not ErrorCode.none and requested is not None:
        # v1 has no top-level error: report it on every requested partition as well.
        fetched = [(topic, [(p, None) for p in partitions]) for topic, partitions in requested]
    return {"throttle_time": _NO_THROTTLE, "error_code": error, "topics": _fetched_topics(fetched, error)}


async def handle_offset_delete(
    coordinator: GroupCoordinator, ctx: RequestContext, request: Any
) -> dict[str, Any]:
    error, results = await coordinator.delete_offsets(
        request.group_id,
        [(t.name, [int(p.partition_index) for p in t.partitions]) for t in request.topics],
    )
    return {
        "error_code": error,
        "throttle_time": _NO_THROTTLE,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "error_code": e} for p, e in partitions]}
            for topic, partitions in results
        ],
    }


GROUP_HANDLERS: dict[int, Handler] = {
    8: handle_offset_commit,
    9: handle_offset_fetch,
    10: handle_find_coordinator,
    11: handle_join_group,
    12: handle_heartbeat,
    13: handle_leave_group,
    14: handle_sync_group,
    15: handle_describe_groups,
    16: handle_list_groups,
    42: handle_delete_groups,
    47: handle_offset_delete,
}
