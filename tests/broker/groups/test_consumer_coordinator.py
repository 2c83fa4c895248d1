"""The KIP-848 driver inside the group coordinator (SQLite): member epochs checked on OffsetCommit
and OffsetFetch, committed offsets and membership kept across a restart (a rebalance carries on
where it stopped; an unreadable record makes the members rejoin), a classic member joining the group
(its assignment withheld until released), and the session timer fencing a silent member."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker.groups import subscription
from tabletopic.broker.groups.assignors import TopicPartition
from tabletopic.broker.groups.consumer_group import HeartbeatRequest
from tabletopic.broker.groups.coordinator import GroupCoordinator, OffsetToCommit
from tabletopic.broker.groups.model import JoinRequest, SyncRequest
from tabletopic.broker.groups.settings import GroupSettings
from tabletopic.broker.groups.store import GroupStore
from tabletopic.broker.handlers.offset_fetch import check_member_epoch
from tests.support.group_coordinators import FAST, TOPICS
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

TOPIC_IDS = {name: (uuid.uuid4(), count) for name, count in TOPICS.items()}


async def started(engine: Engine, session_ms: int = 45_000) -> GroupCoordinator:
    coordinator = GroupCoordinator(
        engine,
        1,
        "127.0.0.1",
        9092,
        TOPICS.get,
        config=FAST,
        consumer_settings=GroupSettings(session_timeout_ms=session_ms),
    )
    coordinator.consumer.topics = lambda: TOPIC_IDS
    await coordinator.start()
    return coordinator


def joined(coordinator: GroupCoordinator, member: str) -> int:
    request = HeartbeatRequest(member, 0, rebalance_timeout_ms=5000, subscribed_topic_names=("orders",))
    result = coordinator.consumer.heartbeat("g", request)
    assert result.error is ErrorCode.none
    return result.member_epoch


async def test_offset_commit_and_fetch_check_member_epochs_and_offsets_survive_a_restart(
    sqlite_engine: Engine,
) -> None:
    coordinator = await started(sqlite_engine)
    epoch = joined(coordinator, "m1")
    commit = [OffsetToCommit("orders", 0, 42)]
    stale = await coordinator.commit_offsets("g", "m1", None, epoch - 1, commit)
    assert stale == {("orders", 0): ErrorCode.stale_member_epoch}
    unknown = await coordinator.commit_offsets("g", "nobody", None, epoch, commit)
    assert unknown == {("orders", 0): ErrorCode.unknown_member_id}
    assert await coordinator.commit_offsets("g", "m1", None, epoch, commit) == {("orders", 0): ErrorCode.none}
    fetch = SimpleNamespace(group_id="g", member_id="m1", member_epoch=epoch + 1)
    assert check_member_epoch(coordinator, fetch) is ErrorCode.stale_member_epoch
    admin = SimpleNamespace(group_id="g", member_id=None, member_epoch=-1)
    assert check_member_epoch(coordinator, admin) is ErrorCode.none
    await coordinator.stop()

    restarted = await started(sqlite_engine)
    error, fetched = restarted.fetch_offsets("g", [("orders", [0])])
    committed = fetched[0][1][0][1]
    assert error is ErrorCode.none and committed is not None and committed.offset == 42
    # Membership is stored too: the member carries on at its epoch, without joining again.
    again = restarted.consumer.heartbeat("g", HeartbeatRequest("m1", epoch))
    assert again.error is ErrorCode.none and again.member_epoch == epoch
    await restarted.stop()


def beat(coordinator: GroupCoordinator, member: str, epoch: int, owned: frozenset[TopicPartition]) -> int:
    result = coordinator.consumer.heartbeat("g", HeartbeatRequest(member, epoch, owned=owned))
    assert result.error is ErrorCode.none, result
    return result.member_epoch


async def test_a_new_coordinator_carries_on_a_rebalance_where_the_last_one_stopped(
    sqlite_engine: Engine,
) -> None:
    coordinator = await started(sqlite_engine)
    first_epoch = joined(coordinator, "m1")
    group = coordinator.consumer.group("g")
    assert group is not None
    everything = group.members["m1"].assigned
    second_epoch = joined(coordinator, "m2")
    # m1 is asked to give up half of the partitions; it has not said it did when the broker goes.
    assert beat(coordinator, "m1", first_epoch, everything) == first_epoch
    before = group.members["m1"]
    assert before.pending_revocation and group.members["m2"].assigned == frozenset()
    await coordinator.stop()

    restarted = await started(sqlite_engine)
    carried = restarted.consumer.group("g")
    assert carried is not None and carried.group_epoch == group.group_epoch
    assert carried.members["m1"].pending_revocation == before.pending_revocation
    assert carried.target == group.target
    # m1 lets go of them; m2 then gets them, and nobody ever owns a partition twice.
    kept = carried.members["m1"].assigned
    assert beat(restarted, "m1", first_epoch, kept) == carried.assignment_epoch
    assert beat(restarted, "m2", second_epoch, frozenset()) == carried.assignment_epoch
    assert carried.members["m2"].assigned == everything - kept
    assert set(carried.owners()) == everything and carried.state == "Stable"
    await restarted.stop()


@pytest.mark.parametrize("record", ['{"version": 99}', "not json", '{"version": 1, "target": []}'])
async def test_an_unreadable_stored_group_is_logged_and_its_members_rejoin(
    sqlite_engine: Engine, caplog: pytest.LogCaptureFixture, record: str
) -> None:
    coordinator = await started(sqlite_engine)
    epoch = joined(coordinator, "m1")
    await coordinator.stop()
    GroupStore(sqlite_engine).save_consumer_group("g", record)

    restarted = await started(sqlite_engine)
    again = restarted.consumer.heartbeat("g", HeartbeatRequest("m1", epoch))
    assert again.error is ErrorCode.unknown_member_id
    assert "consumer group g: stored state unreadable" in caplog.text
    await restarted.stop()


def classic_join(member_id: str, metadata: bytes) -> JoinRequest:
    return JoinRequest(
        group_id="g",
        member_id=member_id,
        group_instance_id=None,
        client_id="classic",
        client_host="/127.0.0.1",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=5_000,
        protocol_type="consumer",
        protocols=(("range", metadata),),
    )


async def test_classic_member_joins_a_consumer_group_and_gets_the_broker_assignment(
    sqlite_engine: Engine,
) -> None:
    coordinator = await started(sqlite_engine)
    joined(coordinator, "m1")
    refused = await coordinator.join_group(classic_join("", b"not a subscription"))
    assert refused.error is ErrorCode.inconsistent_group_protocol
    first = await coordinator.join_group(classic_join("", subscription.encode(["orders"])))
    assert first.error is ErrorCode.member_id_required
    result = await coordinator.join_group(classic_join(first.member_id, subscription.encode(["orders"])))
    assert result.error is ErrorCode.none and result.leader_id == ""
    sync = SyncRequest("g", result.member_id, None, result.generation_id, "consumer", "range")
    synced = await coordinator.sync_group(sync)
    # Its target is still m1's: withheld until m1 revokes, and its heartbeat says to rejoin.
    assert synced.error is ErrorCode.none and synced.assignment == subscription.encode_assignment(frozenset())
    heartbeat = await coordinator.heartbeat("g", result.member_id, None, result.generation_id)
    assert heartbeat is ErrorCode.rebalance_in_progress
    group = coordinator.consumer.group("g")
    assert group is not None and group.target[result.member_id]
    await coordinator.stop()


async def test_silent_member_is_fenced_after_the_session_timeout(sqlite_engine: Engine) -> None:
    coordinator = await started(sqlite_engine, session_ms=50)
    joined(coordinator, "m1")
    group = coordinator.consumer.group("g")
    assert group is not None
    await wait_until(lambda: not group.members, timeout=10)
    assert group.state == "Empty"
    await coordinator.stop()


async def test_consumer_heartbeat_into_a_rebalancing_classic_group_is_group_id_not_found(
    sqlite_engine: Engine,
) -> None:
    coordinator = await started(sqlite_engine)
    first = await coordinator.join_group(classic_join("", subscription.encode(["orders"])))
    joining = asyncio.ensure_future(
        coordinator.join_group(classic_join(first.member_id, subscription.encode(["orders"])))
    )
    await wait_until(lambda: bool((group := coordinator.group("g")) and group.members), timeout=10)
    request = HeartbeatRequest("m1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("orders",))
    refused = coordinator.consumer.heartbeat("g", request)
    assert refused.error is ErrorCode.group_id_not_found and "Stable" in str(refused.message)
    await joining
    await coordinator.stop()


async def test_a_consumer_member_upgrades_a_stable_classic_group_and_shares_its_partitions(
    sqlite_engine: Engine,
) -> None:
    """Kafka 4's online upgrade: the classic member stays (as a classic member of the consumer
    group), is asked to rejoin, gives up half of its partitions, and the new member gets them."""
    coordinator = await started(sqlite_engine)
    metadata = subscription.encode(["orders"])
    first = await coordinator.join_group(classic_join("", metadata))
    joined_classic = await coordinator.join_group(classic_join(first.member_id, metadata))
    classic, generation = joined_classic.member_id, joined_classic.generation_id
    everything = frozenset(("orders", p) for p in range(TOPICS["orders"]))
    assignment = {classic: subscription.encode_assignment(everything)}
    sync = SyncRequest("g", classic, None, generation, "consumer", "range", assignment)
    assert (await coordinator.sync_group(sync)).error is ErrorCode.none

    request = HeartbeatRequest("m2", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("orders",))
    upgraded = coordinator.consumer.heartbeat("g", request)
    assert upgraded.error is ErrorCode.none and upgraded.member_epoch == generation + 1
    assert upgraded.assignment == frozenset()  # everything is still the classic member's
    assert await coordinator.heartbeat("g", classic, None, generation) is ErrorCode.rebalance_in_progress
    rejoined = await coordinator.join_group(classic_join(classic, metadata))  # eager: owns nothing now
    assert rejoined.error is ErrorCode.none
    resync = SyncRequest("g", classic, None, rejoined.generation_id, "consumer", "range")
    kept = subscription.assigned_partitions((await coordinator.sync_group(resync)).assignment)
    beat = HeartbeatRequest("m2", upgraded.member_epoch, owned=frozenset())
    taken = coordinator.consumer.heartbeat("g", beat).assignment
    assert kept is not None and taken is not None
    assert kept | taken == everything and not kept & taken and kept and taken
    group = coordinator.group("g")
    assert group is not None and not group.members  # the classic side keeps only the offsets
    await coordinator.stop()
    restarted = await started(sqlite_engine)  # the stored classic group has no members either
    restored = restarted.group("g")
    assert restored is None or not restored.members
    await restarted.stop()


@pytest.mark.parametrize(
    ("version", "fields", "error"),
    [
        (1, {"member_id": ""}, ErrorCode.invalid_request),  # v1+: the consumer makes its id
        (1, {"server_assignor": "sticky"}, ErrorCode.unsupported_assignor),
        (1, {"subscribed_topic_regex": "(unclosed"}, ErrorCode.invalid_regular_expression),
        (1, {"subscribed_topic_names": None}, ErrorCode.invalid_request),  # a join must subscribe
        (1, {"rebalance_timeout": datetime.timedelta(milliseconds=-1)}, ErrorCode.invalid_request),
        (0, {"member_id": ""}, ErrorCode.none),  # v0: the coordinator makes the id
    ],
)
async def test_heartbeat_handler_refuses_bad_requests_in_the_protocols_terms(
    sqlite_engine: Engine, version: int, fields: dict[str, object], error: ErrorCode
) -> None:
    from kio.schema.consumer_group_heartbeat import v0, v1

    from tests.support.broker_calls import call

    schema = (v0, v1)[version].request.ConsumerGroupHeartbeatRequest
    coordinator = await started(sqlite_engine)
    values: dict[str, object] = {
        "group_id": "g",
        "member_id": "m1",
        "member_epoch": 0,
        "subscribed_topic_names": ("orders",),
        "topic_partitions": (),
        "rebalance_timeout": datetime.timedelta(seconds=5),
        **fields,
    }
    response = await call(coordinator, schema(**values))
    assert response.error_code is error
    if error is ErrorCode.none:
        assert response.member_id and response.member_epoch == 1
        assert {t.topic_id for t in response.assignment.topic_partitions} == {TOPIC_IDS["orders"][0]}
    await coordinator.stop()


async def test_group_ids_name_the_classic_and_the_consumer_groups_the_console_samples(
    sqlite_engine: Engine,
) -> None:
    """The console's lag plots sample the groups of :meth:`GroupCoordinator.group_ids`: a KIP-848
    group is one of them, beside the classic ones (it was left out, so it had no lag plot)."""
    coordinator = await started(sqlite_engine)
    joined(coordinator, "m1")
    classic = dataclasses.replace(classic_join("", subscription.encode(["orders"])), group_id="c")
    await coordinator.join_group(classic)
    assert coordinator.group_ids() == ["c", "g"]
    await coordinator.stop()
