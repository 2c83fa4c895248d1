"""The consumer-group handlers (GROUP_HANDLERS) called with real kio request objects of several
versions; every answer is built into that version's kio response class with the broker's
``build_response`` and encoded, so a field the version cannot carry shows up here rather than on a
client's socket."""

from __future__ import annotations

import datetime
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups import subscription
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.handlers import GROUP_HANDLERS
from tabletopic.broker.protocol import build_response, encode_response

pytestmark = pytest.mark.timeout(60)

_MODULES = {
    8: "offset_commit",
    9: "offset_fetch",
    10: "find_coordinator",
    11: "join_group",
    12: "heartbeat",
    13: "leave_group",
    14: "sync_group",
    15: "describe_groups",
    16: "list_groups",
    42: "delete_groups",
    47: "offset_delete",
}

SUBSCRIPTION = subscription.encode(["orders"])


def kio(api_key: int, version: int, entity: str, /, **fields: Any) -> Any:
    """An entity of the request schema of ``api_key`` at ``version`` (``entity`` as kio names it)."""
    module = importlib.import_module(f"kio.schema.{_MODULES[api_key]}.v{version}.request")
    return getattr(module, entity)(**fields)


async def call(coordinator: GroupCoordinator, api_key: int, request: Any) -> Any:
    """Run the handler, then build and encode the response at the request's version."""
    version = int(type(request).__version__)
    ctx = RequestContext(api_key, version, 7, "test-client", "127.0.0.1:50123", 1)
    fields = await GROUP_HANDLERS[api_key](coordinator, ctx, request)
    response = build_response(api_key, version, fields)
    assert encode_response(7, response)
    return response


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def join_request(version: int, member_id: str = "", instance: str | None = None) -> Any:
    fields: dict[str, Any] = {
        "group_id": "g",
        "session_timeout": ms(10_000),
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": (kio(11, version, "JoinGroupRequestProtocol", name="range", metadata=SUBSCRIPTION),),
    }
    if version >= 1:
        fields["rebalance_timeout"] = ms(5_000)
    if version >= 5:
        fields["group_instance_id"] = instance
    return kio(11, version, "JoinGroupRequest", **fields)


async def join_as_single_member(coordinator: GroupCoordinator, version: int) -> Any:
    response = await call(coordinator, 11, join_request(version))
    if version >= 4:
        assert response.error_code is ErrorCode.member_id_required
        response = await call(coordinator, 11, join_request(version, response.member_id))
    assert response.error_code is ErrorCode.none
    return response


@pytest.mark.parametrize("version", [0, 3])
async def test_find_coordinator_before_v4_answers_this_broker(
    coordinator: GroupCoordinator, version: int
) -> None:
    fields: dict[str, Any] = {"key": "g"}
    if version >= 1:
        fields["key_type"] = 0
    response = await call(coordinator, 10, kio(10, version, "FindCoordinatorRequest", **fields))
    assert (response.error_code, response.node_id, response.host, response.port) == (
        ErrorCode.none,
        1,
        "127.0.0.1",
        9092,
    )


async def test_find_coordinator_v4_answers_every_batched_key(coordinator: GroupCoordinator) -> None:
    request = kio(10, 4, "FindCoordinatorRequest", key_type=0, coordinator_keys=("a", "b"))
    response = await call(coordinator, 10, request)
    assert [(c.key, c.node_id, c.port, c.error_code) for c in response.coordinators] == [
        ("a", 1, 9092, ErrorCode.none),
        ("b", 1, 9092, ErrorCode.none),
    ]
    bad = await call(
        coordinator, 10, kio(10, 4, "FindCoordinatorRequest", key_type=2, coordinator_keys=("s",))
    )
    assert bad.coordinators[0].error_code is ErrorCode.invalid_request


@pytest.mark.parametrize("version", [0, 1, 3, 4, 5, 7, 9])
async def test_member_lifecycle_at_each_join_group_version(
    coordinator: GroupCoordinator, version: int
) -> None:
    joined = await join_as_single_member(coordinator, version)
    member_id, generation = joined.member_id, joined.generation_id
    assert generation == 1 and joined.leader == member_id
    assert joined.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member_id, SUBSCRIPTION)]

    sync_version = min(version, 5)
    assignment = kio(14, sync_version, "SyncGroupRequestAssignment", member_id=member_id, assignment=b"A")
    sync_fields: dict[str, Any] = {
        "group_id": "g",
        "generation_id": generation,
        "member_id": member_id,
        "assignments": (assignment,),
    }
    if sync_version >= 5:
        sync_fields |= {"protocol_type": "consumer", "protocol_name": "range"}
    synced = await call(coordinator, 14, kio(14, sync_version, "SyncGroupRequest", **sync_fields))
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"A")

    hb_version = min(version, 4)
    beat = kio(
        12, hb_version, "HeartbeatRequest", group_id="g", generation_id=generation, member_id=member_id
    )
    assert (await call(coordinator, 12, beat)).error_code is ErrorCode.none
    stale = kio(12, hb_version, "HeartbeatRequest", group_id="g", generation_id=0, member_id=member_id)
    assert (await call(coordinator, 12, stale)).error_code is ErrorCode.illegal_generation

    leave_version = min(version, 5)
    if leave_version >= 3:
        identity = kio(13, leave_version, "MemberIdentity", member_id=member_id)
        leave = kio(13, leave_version, "LeaveGroupRequest", group_id="g", members=(identity,))
        left = await call(coordinator, 13, leave)
        assert left.error_code is ErrorCode.none
        assert [(m.member_id, m.error_code) for m in left.members] == [(member_id, ErrorCode.none)]
    else:
        leave = kio(13, leave_version, "LeaveGroupRequest", group_id="g", member_id=member_id)
        assert (await call(coordinator, 13, leave)).error_code is ErrorCode.none
        assert (await call(coordinator, 13, leave)).error_code is ErrorCode.unknown_member_id


@pytest.mark.parametrize("commit_version", [2, 5, 6, 8, 9])
async def test_offsets_round_trip_with_metadata_and_leader_epoch(
    coordinator: GroupCoordinator, commit_version: int
) -> None:
    partition_fields: dict[str, Any] = {
        "partition_index": 1,
        "committed_offset": 99,
        "committed_metadata": "m",
    }
    if commit_version >= 6:
        partition_fields["committed_leader_epoch"] = 4
    partition = kio(8, commit_version, "OffsetCommitRequestPartition", **partition_fields)
    topic = kio(8, commit_version, "OffsetCommitRequestTopic", name="orders", partitions=(partition,))
    missing = kio(8, commit_version, "OffsetCommitRequestTopic", name="nope", partitions=(partition,))
    # A "simple" consumer: no generation, no member id.
    commit = kio(
        8, commit_version, "OffsetCommitRequest", group_id="g", member_id="", topics=(topic, missing)
    )
    committed = await call(coordinator, 8, commit)
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in committed.topics
    ] == [
        ("orders", [(1, ErrorCode.none)]),
        ("nope", [(1, ErrorCode.unknown_topic_or_partition)]),
    ]

    # v1 names partitions; v7 asks for all (null topics); v8 batches groups.
    wanted = kio(9, 1, "OffsetFetchRequestTopic", name="orders", partition_indexes=(0, 1))
    v1 = await call(coordinator, 9, kio(9, 1, "OffsetFetchRequest", group_id="g", topics=(wanted,)))
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in v1.topics[0].partitions] == [
        (0, -1, ""),
        (1, 99, "m"),
    ]
    v7 = await call(coordinator, 9, kio(9, 7, "OffsetFetchRequest", group_id="g", topics=None))
    [partition7] = v7.topics[0].partitions
    epoch = 4 if commit_version >= 6 else -1
    assert (v7.topics[0].name, partition7.committed_offset, partition7.committed_leader_epoch) == (
        "orders",
        99,
        epoch,
    )
    groups = (
        kio(9, 8, "OffsetFetchRequestGroup", group_id="g", topics=None),
        kio(
            9,
            8,
            "OffsetFetchRequestGroup",
            group_id="other",
            topics=(kio(9, 8, "OffsetFetchRequestTopics", name="orders", partition_indexes=(0,)),),
        ),
    )
    v8 = await call(coordinator, 9, kio(9, 8, "OffsetFetchRequest", groups=groups))
    assert [g.group_id for g in v8.groups] == ["g", "other"]
    assert v8.groups[0].topics[0].partitions[0].committed_offset == 99
    assert v8.groups[1].topics[0].partitions[0].committed_offset == -1


async def test_commit_by_a_member_of_a_stale_generation_is_refused(coordinator: GroupCoordinator) -> None:
    joined = await join_as_single_member(coordinator, 9)
    partition = kio(
        8, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1, committed_metadata=None
    )
    topic = kio(8, 9, "OffsetCommitRequestTopic", name="orders", partitions=(partition,))
    commit = kio(
        8,
        9,
        "OffsetCommitRequest",
        group_id="g",
        generation_id_or_member_epoch=0,
        member_id=joined.member_id,
        topics=(topic,),
    )
    response = await call(coordinator, 8, commit)
    assert response.topics[0].partitions[0].error_code is ErrorCode.illegal_generation


async def test_batched_leave_reports_unknown_members_individually(coordinator: GroupCoordinator) -> None:
    joined = await join_as_single_member(coordinator, 5)
    members = (
        kio(13, 5, "MemberIdentity", member_id=joined.member_id, reason="bye"),
        kio(13, 5, "MemberIdentity", member_id="ghost"),
    )
    response = await call(coordinator, 13, kio(13, 5, "LeaveGroupRequest", group_id="g", members=members))
    assert [m.error_code for m in response.members] == [ErrorCode.none, ErrorCode.unknown_member_id]


@pytest.mark.parametrize("version", [0, 5])
async def test_describe_groups_shows_members_metadata_and_assignment(
    coordinator: GroupCoordinator, version: int
) -> None:
    joined = await join_as_single_member(coordinator, 5)
    assignment = kio(14, 5, "SyncGroupRequestAssignment", member_id=joined.member_id, assignment=b"A")
    await call(
        coordinator,
        14,
        kio(
            14,
            5,
            "SyncGroupRequest",
            group_id="g",
            generation_id=1,
            member_id=joined.member_id,
            assignments=(assignment,),
        ),
    )
    fields: dict[str, Any] = {"groups": ("g", "unknown")}
    if version >= 3:
        fields["include_authorized_operations"] = False
    response = await call(coordinator, 15, kio(15, version, "DescribeGroupsRequest", **fields))
    described, unknown = response.groups
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    [member] = described.members
    assert (member.member_id, member.client_id, member.client_host) == (
        joined.member_id,
        "test-client",
        "/127.0.0.1",
    )
    assert (member.member_metadata, member.member_assignment) == (SUBSCRIPTION, b"A")
    assert (unknown.error_code, unknown.group_state) == (ErrorCode.none, "Dead")
    if version >= 3:
        asked = kio(15, version, "DescribeGroupsRequest", groups=("g",), include_authorized_operations=True)
        assert (await call(coordinator, 15, asked)).groups[0].authorized_operations == 328


async def test_list_groups_filters_by_state_and_type(coordinator: GroupCoordinator) -> None:
    await join_as_single_member(coordinator, 5)  # "g" waits in CompletingRebalance
    partition = kio(
        8, 2, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1, committed_metadata=""
    )
    topic = kio(8, 2, "OffsetCommitRequestTopic", name="orders", partitions=(partition,))
    await call(
        coordinator, 8, kio(8, 2, "OffsetCommitRequest", group_id="simple", member_id="", topics=(topic,))
    )

    everything = await call(coordinator, 16, kio(16, 0, "ListGroupsRequest"))
    assert {(g.group_id, g.protocol_type) for g in everything.groups} == {("g", "consumer"), ("simple", "")}
    empty = await call(coordinator, 16, kio(16, 4, "ListGroupsRequest", states_filter=("empty",)))
    assert [(g.group_id, g.group_state) for g in empty.groups] == [("simple", "Empty")]
    classic = await call(coordinator, 16, kio(16, 5, "ListGroupsRequest", types_filter=("Classic",)))
    assert {g.group_type for g in classic.groups} == {"classic"} and len(classic.groups) == 2
    consumer = await call(coordinator, 16, kio(16, 5, "ListGroupsRequest", types_filter=("consumer",)))
    assert consumer.groups == ()


async def test_delete_groups_and_offset_delete(coordinator: GroupCoordinator) -> None:
    joined = await join_as_single_member(coordinator, 5)
    partition = kio(
        8, 2, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1, committed_metadata=""
    )
    topic = kio(8, 2, "OffsetCommitRequestTopic", name="events", partitions=(partition,))
    await call(
        coordinator, 8, kio(8, 2, "OffsetCommitRequest", group_id="simple", member_id="", topics=(topic,))
    )

    deleted = await call(
        coordinator, 42, kio(42, 2, "DeleteGroupsRequest", groups_names=("g", "simple", "zzz"))
    )
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("g", ErrorCode.non_empty_group),
        ("simple", ErrorCode.none),
        ("zzz", ErrorCode.group_id_not_found),
    ]
    assert joined.member_id

    delete_topic = kio(
        47,
        0,
        "OffsetDeleteRequestTopic",
        name="orders",
        partitions=(kio(47, 0, "OffsetDeleteRequestPartition", partition_index=0),),
    )
    response = await call(
        coordinator, 47, kio(47, 0, "OffsetDeleteRequest", group_id="g", topics=(delete_topic,))
    )
    assert response.error_code is ErrorCode.none
    assert response.topics[0].partitions[0].error_code is ErrorCode.group_subscribed_to_topic
    missing = await call(
        coordinator, 47, kio(47, 0, "OffsetDeleteRequest", group_id="zzz", topics=(delete_topic,))
    )
    assert missing.error_code is ErrorCode.group_id_not_found
