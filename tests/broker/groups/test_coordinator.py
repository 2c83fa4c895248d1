"""The asyncio coordinator: held-back JoinGroup/SyncGroup answers, real timers, durable offsets and
membership across a restart on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker.groups.coordinator import MAX_GROUP_ID_BYTES, GroupCoordinator, OffsetToCommit
from tabletopic.broker.groups.group import MEMBER_ID_PREFIX_CHARS, random_member_id
from tabletopic.broker.groups.model import (
    GroupState,
    Member,
    MemberIdentity,
    SyncRequest,
)
from tests.support.group_coordinators import join, join_request, make_coordinator
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def state(coordinator: GroupCoordinator) -> GroupState | None:
    group = coordinator.group("g")
    return None if group is None else group.state


def member(coordinator: GroupCoordinator, member_id: str) -> Member:
    group = coordinator.group("g")
    assert group is not None
    return group.members[member_id]


async def test_two_members_join_concurrently_and_receive_the_leaders_assignment(
    coordinator: GroupCoordinator,
) -> None:
    a = await join(coordinator)
    await coordinator.sync_group(SyncRequest("g", a.member_id, None, 1, None, None, {a.member_id: b"A"}))
    b_task = asyncio.create_task(join(coordinator, client_id="b"))
    await wait_until(lambda: state(coordinator) is GroupState.PREPARING_REBALANCE, message="b joins")
    assert await coordinator.heartbeat("g", a.member_id, None, 1) is ErrorCode.rebalance_in_progress
    a2 = await coordinator.join_group(join_request(a.member_id))
    b = await b_task
    assert a2.generation_id == b.generation_id == 2
    assert a2.leader_id == a.member_id and len(a2.members) == 2

    b_sync = asyncio.create_task(coordinator.sync_group(SyncRequest("g", b.member_id, None, 2, None, None)))
    await wait_until(lambda: member(coordinator, b.member_id).sync_ticket is not None, message="b waits")
    assert not b_sync.done()
    leader_sync = await coordinator.sync_group(
        SyncRequest("g", a.member_id, None, 2, "consumer", "range", {a.member_id: b"A", b.member_id: b"B"})
    )
    assert leader_sync.assignment == b"A"
    assert (await b_sync).assignment == b"B"
    group = coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE


async def test_silent_member_is_expired_by_its_session_timer(coordinator: GroupCoordinator) -> None:
    a = await join(coordinator, session_ms=200)
    await coordinator.sync_group(SyncRequest("g", a.member_id, None, 1, None, None, {}))
    await wait_until(lambda: state(coordinator) is GroupState.EMPTY, message="the session expires")
    group = coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY and group.generation_id == 2
    assert await coordinator.heartbeat("g", a.member_id, None, 1) is ErrorCode.unknown_member_id


async def test_heartbeats_keep_a_member_alive_past_its_session_timeout(coordinator: GroupCoordinator) -> None:
    a = await join(coordinator, session_ms=300)
    await coordinator.sync_group(SyncRequest("g", a.member_id, None, 1, None, None, {}))
    for _ in range(6):
        await asyncio.sleep(0.1)  # the subject: 0.6 s pass, twice the session timeout, with heartbeats
        assert await coordinator.heartbeat("g", a.member_id, None, 1) is ErrorCode.none


async def test_offsets_and_membership_survive_a_restart(engine: Engine) -> None:
    first = make_coordinator(engine)
    await first.start()
    a = await join(first)
    await first.sync_group(SyncRequest("g", a.member_id, None, 1, None, None, {a.member_id: b"A"}))
    results = await first.commit_offsets(
        "g",
        a.member_id,
        None,
        1,
        [OffsetToCommit("orders", 0, 42, 7, "meta-0"), OffsetToCommit("orders", 2, 9, -1, None)],
    )
    assert set(results.values()) == {ErrorCode.none}
    simple = await first.commit_offsets("tool", "", None, -1, [OffsetToCommit("events", 0, 5, -1, "x")])
    assert simple == {("events", 0): ErrorCode.none}
    await first.stop()

    second = make_coordinator(engine)
    await second.start()
    try:
        error, fetched = second.fetch_offsets("g", None)
        assert error is ErrorCode.none
        [(topic, partitions)] = fetched
        assert topic == "orders"
        values = {p: v for p, v in partitions}
        assert values[0] is not None and (values[0].offset, values[0].leader_epoch) == (42, 7)
        assert values[0].metadata == "meta-0"
        assert values[2] is not None and values[2].offset == 9 and values[2].metadata is None
        _, tool = second.fetch_offsets("tool", [("events", [0])])
        assert tool[0][1][0][1] is not None and tool[0][1][0][1].offset == 5

        group = second.group("g")
        assert group is not None and group.state is GroupState.STABLE and group.generation_id == 1
        assert await second.heartbeat("g", a.member_id, None, 1) is ErrorCode.none
        synced = await second.sync_group(SyncRequest("g", a.member_id, None, 1, None, None))
        assert synced.assignment == b"A"
        listed = {g.group_id: g.state for g in second.list_groups()}
        assert listed == {"g": GroupState.STABLE, "tool": GroupState.EMPTY}
    finally:
        await second.stop()


async def test_commit_to_unknown_topic_partition_or_with_huge_metadata_is_refused(
    coordinator: GroupCoordinator,
) -> None:
    results = await coordinator.commit_offsets(
        "g",
        "",
        None,
        -1,
        [
            OffsetToCommit("nope", 0, 1),
            OffsetToCommit("orders", 3, 1),
            OffsetToCommit("orders", 1, 1, metadata="x" * 5000),
            OffsetToCommit("orders", 0, 1),
        ],
    )
    assert results == {
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
        ("orders", 3): ErrorCode.unknown_topic_or_partition,
        ("orders", 1): ErrorCode.offset_metadata_too_large,
        ("orders", 0): ErrorCode.none,
    }


async def test_a_group_id_over_1024_bytes_is_an_invalid_group_id_before_anything_is_stored(
    coordinator: GroupCoordinator,
) -> None:
    """It leads the stored offsets' key, which PostgreSQL cannot index much over 2.7 kB."""
    longest = "é" * (MAX_GROUP_ID_BYTES // 2)  # two bytes each: exactly the limit
    refused = await coordinator.commit_offsets(longest + "x", "", None, -1, [OffsetToCommit("orders", 0, 1)])
    assert refused == {("orders", 0): ErrorCode.invalid_group_id}
    accepted = await coordinator.commit_offsets(longest, "", None, -1, [OffsetToCommit("orders", 0, 1)])
    assert accepted == {("orders", 0): ErrorCode.none}


def test_a_member_id_begins_with_at_most_255_characters_of_the_client_id() -> None:
    member_id = random_member_id("c" * 4000)
    assert (
        member_id.startswith("c" * MEMBER_ID_PREFIX_CHARS + "-")
        and len(member_id) == MEMBER_ID_PREFIX_CHARS + 37
    )


async def test_generation_commit_to_a_group_never_seen_is_an_illegal_generation(
    coordinator: GroupCoordinator,
) -> None:
    results = await coordinator.commit_offsets("ghost", "m-1", None, 3, [OffsetToCommit("orders", 0, 1)])
    assert results == {("orders", 0): ErrorCode.illegal_generation}


async def test_a_transactional_commit_is_checked_against_the_members_generation(
    coordinator: GroupCoordinator,
) -> None:
    """TxnOffsetCommit (KIP-447): the current generation's member may, also mid-rebalance; an older
    generation, an unknown member or a group never seen may not; a producer naming no member is
    not checked."""
    a = await join(coordinator)
    await coordinator.sync_group(SyncRequest("g", a.member_id, None, 1, None, None, {a.member_id: b"A"}))
    check = coordinator.check_transactional_commit
    assert check("g", a.member_id, None, 1) is ErrorCode.none
    assert check("g", a.member_id, None, 0) is ErrorCode.illegal_generation
    assert check("g", "gone", None, 1) is ErrorCode.unknown_member_id
    assert check("g", "", None, -1) is ErrorCode.none
    assert check("ghost", a.member_id, None, 1) is ErrorCode.unknown_member_id
    joining = asyncio.create_task(join(coordinator, client_id="b"))  # a rebalance begins
    await wait_until(lambda: state(coordinator) is GroupState.PREPARING_REBALANCE, message="b joins")
    assert check("g", a.member_id, None, 1) is ErrorCode.none
    joining.cancel()


async def test_delete_groups_refuses_active_groups_and_forgets_offsets_of_empty_ones(engine: Engine) -> None:
    coordinator = make_coordinator(engine)
    await coordinator.start()
    a = await join(coordinator)
    await coordinator.sync_group(SyncRequest("g", a.member_id, None, 1, None, None, {}))
    await coordinator.commit_offsets("g", a.member_id, None, 1, [OffsetToCommit("orders", 0, 10)])
    results = await coordinator.delete_groups(["g", "missing"])
    assert results == {"g": ErrorCode.non_empty_group, "missing": ErrorCode.group_id_not_found}
    assert await coordinator.leave_group("g", [MemberIdentity(a.member_id)]) == [ErrorCode.none]
    assert await coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert coordinator.group("g") is None
    await coordinator.stop()

    again = make_coordinator(engine)
    await again.start()
    try:
        assert again.group("g") is None
        assert again.fetch_offsets("g", None) == (ErrorCode.none, [])
    finally:
        await again.stop()


async def test_offset_delete_refuses_topics_an_active_member_subscribes_to(
    coordinator: GroupCoordinator,
) -> None:
    a = await join(coordinator, topics=["orders"])
    await coordinator.sync_group(SyncRequest("g", a.member_id, None, 1, None, None, {}))
    await coordinator.commit_offsets(
        "g", a.member_id, None, 1, [OffsetToCommit("orders", 0, 1), OffsetToCommit("events", 0, 2)]
    )
    error, results = await coordinator.delete_offsets("g", [("orders", [0]), ("events", [0])])
    assert error is ErrorCode.none
    assert results == [
        ("orders", [(0, ErrorCode.group_subscribed_to_topic)]),
        ("events", [(0, ErrorCode.none)]),
    ]
    _, fetched = coordinator.fetch_offsets("g", None)
    assert [topic for topic, _ in fetched] == ["orders"]
    assert (await coordinator.delete_offsets("nope", [("orders", [0])]))[0] is ErrorCode.group_id_not_found


async def test_stop_answers_held_back_joins_with_not_coordinator(sqlite_engine: Engine) -> None:
    coordinator = make_coordinator(sqlite_engine)
    await coordinator.start()
    a = await join(coordinator)
    await coordinator.sync_group(SyncRequest("g", a.member_id, None, 1, None, None, {}))
    waiting = asyncio.create_task(join(coordinator, client_id="b"))
    await wait_until(lambda: state(coordinator) is GroupState.PREPARING_REBALANCE, message="b joins")
    await coordinator.stop()
    assert (await waiting).error is ErrorCode.not_coordinator


async def test_offsets_of_a_deleted_topic_are_forgotten(coordinator: GroupCoordinator) -> None:
    await coordinator.commit_offsets(
        "g", "", None, -1, [OffsetToCommit("orders", 0, 5), OffsetToCommit("events", 0, 6)]
    )
    await coordinator.delete_topic_offsets("orders")
    _, fetched = coordinator.fetch_offsets("g", None)
    assert [topic for topic, _ in fetched] == ["events"]


async def test_commits_arriving_while_a_write_runs_join_one_write_and_the_last_offset_wins(
    coordinator: GroupCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group committing faster than the database writes waits for two writes, not a queue of
    them: what arrives while the first runs is written together, each caller answered after it."""
    store = coordinator._store
    written: list[dict[tuple[str, int], int]] = []
    release = threading.Event()
    commit = store.commit_offsets

    def slow_commit(group_id: str, offsets: dict[Any, Any], fence: Any = None) -> None:
        written.append({key: value.offset for key, value in offsets.items()})
        release.wait(10)
        commit(group_id, offsets, fence)

    monkeypatch.setattr(store, "commit_offsets", slow_commit)

    def commit_one(partition: int, offset: int) -> asyncio.Task[dict[tuple[str, int], ErrorCode]]:
        batch = [OffsetToCommit("orders", partition, offset)]
        return asyncio.ensure_future(coordinator.commit_offsets("g", "", None, -1, batch))

    first = commit_one(0, 1)
    await wait_until(lambda: len(written) == 1)
    later = [commit_one(0, 2), commit_one(1, 3), commit_one(0, 4), commit_one(2, 5)]
    await asyncio.sleep(0.05)  # the subject: nothing more is written while the first write runs
    assert len(written) == 1 and not any(task.done() for task in later)
    release.set()
    answers = await asyncio.gather(first, *later)
    assert all(set(answer.values()) == {ErrorCode.none} for answer in answers)
    assert written == [{("orders", 0): 1}, {("orders", 0): 4, ("orders", 1): 3, ("orders", 2): 5}]
    _, fetched = coordinator.fetch_offsets("g", None)
    offsets = {p: v.offset for _, partitions in fetched for p, v in partitions if v is not None}
    assert offsets == {0: 4, 1: 3, 2: 5}


async def test_a_commit_queued_after_another_write_of_its_group_does_not_overtake_it(
    coordinator: GroupCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offsets join a queued commit only while it is the group's last write: a commit after an
    OffsetDelete is written after the delete, so the delete cannot remove it."""
    store = coordinator._store
    started, release = threading.Event(), threading.Event()
    commit = store.commit_offsets

    def slow_commit(group_id: str, offsets: dict[Any, Any], fence: Any = None) -> None:
        started.set()
        release.wait(10)
        commit(group_id, offsets, fence)

    def commit_one(offset: int) -> asyncio.Task[dict[tuple[str, int], ErrorCode]]:
        return asyncio.ensure_future(
            coordinator.commit_offsets("g", "", None, -1, [OffsetToCommit("orders", 0, offset)])
        )

    monkeypatch.setattr(store, "commit_offsets", slow_commit)
    running = commit_one(1)
    await wait_until(started.is_set)
    queued = commit_one(2)  # waits behind the running write, open to later offsets
    deleted = asyncio.ensure_future(coordinator.delete_offsets("g", [("orders", [0])]))
    await asyncio.sleep(0)  # one turn of the loop: the delete queues behind the running write
    after = commit_one(9)  # queued after the delete, not joined to the commit before it
    release.set()
    await asyncio.gather(running, queued, deleted, after)
    _, fetched = coordinator.fetch_offsets("g", None)
    assert [(p, v.offset) for _, partitions in fetched for p, v in partitions if v is not None] == [(0, 9)]


async def test_each_commit_tells_how_far_it_moved_the_group_on_a_partition(
    coordinator: GroupCoordinator,
) -> None:
    """What a cluster's brokers report as records consumed: the distance from the group's last
    committed offset, never a first commit (where the group started, maybe the whole log) or an
    offset moved back (a reset)."""
    told: list[tuple[str, int, int]] = []
    coordinator.on_consumed = lambda topic, partition, records: told.append((topic, partition, records))

    async def commit(*offsets: tuple[int, int]) -> None:
        commits = [OffsetToCommit("orders", p, o) for p, o in offsets]
        assert set((await coordinator.commit_offsets("g", "", None, -1, commits)).values()) == {
            ErrorCode.none
        }

    await commit((0, 500), (1, 7))
    assert told == []
    await commit((0, 530), (1, 7))
    await commit((0, 20), (1, 9))  # partition 0 reset back, partition 1 read on
    assert told == [("orders", 0, 30), ("orders", 1, 2)]
