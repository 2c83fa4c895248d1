"""The share group handlers called directly (broker service on memory storage, a group coordinator
on its database): bad input gets Kafka's error codes, never an exception; describe and list show
the share group."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker.group_configs import state_prefix
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.service import BrokerService
from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request, request


@pytest.fixture
async def share_broker(
    broker_service: BrokerService, sqlite_engine: Engine
) -> AsyncIterator[tuple[BrokerService, GroupCoordinator]]:
    """The broker service with a coordinator wired as the node wires it, and a topic of 4 records
    whose share group starts at the earliest offset."""
    broker, engine = broker_service, sqlite_engine
    coordinator = GroupCoordinator(engine, 1, "127.0.0.1", 9092, lambda name: None)
    coordinator.consumer.topics = lambda: {
        t.name: (t.topic_id, t.partition_count) for t in broker.topics.all()
    }
    coordinator.share.topics = lambda: {t.name: t.partition_count for t in broker.topics.all()}
    coordinator.share.end_offset = lambda name, index: 4  # the 4 records produced below
    await coordinator.start()
    broker.share_groups = coordinator.share
    await broker.topics.create("t", 1, {})
    await call(broker, produce_request("t", 0, make_batch([b"a", b"b", b"c", b"d"])))
    await broker.topics.replace_state_items(state_prefix("g"), {"share.auto.offset.reset": "earliest"})
    yield broker, coordinator
    await coordinator.stop()


def _topic_id(broker: BrokerService) -> Any:
    topic = broker.topics.get("t")
    assert topic is not None
    return topic.topic_id


def _heartbeat(member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return request(76, 1, group_id="g", member_id=member, member_epoch=epoch, subscribed_topic_names=topics)


def _fetch(
    broker: BrokerService, epoch: int, acks: list[dict[str, Any]] | None = None, member: str = "m1"
) -> Any:
    partition = {"partition_index": 0, "acknowledgement_batches": acks or []}
    return request(
        78,
        1,
        group_id="g",
        member_id=member,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_records=2,
        batch_size=2,
        topics=[{"topic_id": _topic_id(broker), "partitions": [partition]}],
        forgotten_topics_data=[],
    )


def _ack(broker: BrokerService, epoch: int, first: int, last: int, kind: int) -> Any:
    batch = {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}
    partition = {"partition_index": 0, "acknowledgement_batches": [batch]}
    return request(
        79,
        1,
        group_id="g",
        member_id="m1",
        share_session_epoch=epoch,
        topics=[{"topic_id": _topic_id(broker), "partitions": [partition]}],
    )


async def test_heartbeat_errors_and_joining(share_broker: tuple[BrokerService, GroupCoordinator]) -> None:
    _, coordinator = share_broker
    assert (await call(coordinator, _heartbeat("", 0, ["t"]))).error_code is ErrorCode.invalid_request
    assert (await call(coordinator, _heartbeat("m1", 3))).error_code is ErrorCode.unknown_member_id
    joined = await call(coordinator, _heartbeat("m1", 0, ["t"]))
    assert joined.error_code is ErrorCode.none and joined.member_epoch == 1
    assert joined.assignment is not None and list(joined.assignment.topic_partitions[0].partitions) == [0]
    assert (await call(coordinator, _heartbeat("m1", 7))).error_code is ErrorCode.fenced_member_epoch
    assert (await call(coordinator, _heartbeat("m1", 1))).error_code is ErrorCode.none


async def test_share_fetch_sessions_and_acknowledgement_errors(
    share_broker: tuple[BrokerService, GroupCoordinator],
) -> None:
    broker, coordinator = share_broker
    # What the records accepted tell the broker (a share group's consumption, for the cluster's charts).
    accepted_records: list[tuple[str, int, int]] = []
    coordinator.share.on_consumed = lambda topic, p, n: accepted_records.append((topic, p, n))
    assert (await call(broker, _fetch(broker, 0))).error_code is ErrorCode.unknown_member_id  # not joined
    await call(coordinator, _heartbeat("m1", 0, ["t"]))
    assert (await call(broker, _fetch(broker, 3))).error_code is ErrorCode.share_session_not_found
    opened = await call(broker, _fetch(broker, 0))
    (partition,) = opened.responses[0].partitions
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in partition.acquired_records] == [
        (0, 1, 1)
    ]
    assert opened.acquisition_lock_timeout == datetime.timedelta(seconds=30)
    assert (await call(broker, _fetch(broker, 5))).error_code is ErrorCode.invalid_share_session_epoch
    # Offsets 2..3 were never acquired by this member: nothing of the batch applies.
    bad = await call(broker, _ack(broker, 1, 1, 2, 1))
    assert bad.error_code is ErrorCode.none
    assert bad.responses[0].partitions[0].error_code is ErrorCode.invalid_record_state
    released = await call(
        broker, _fetch(broker, 2, [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [2]}])
    )
    (partition,) = released.responses[0].partitions
    assert partition.acknowledge_error_code == 0
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in partition.acquired_records] == [
        (0, 1, 2)
    ]
    assert (await call(broker, _ack(broker, 0, 0, 0, 1))).error_code is ErrorCode.invalid_share_session_epoch
    accepted = await call(broker, _ack(broker, -1, 0, 1, 1))  # closes the session
    assert accepted.responses[0].partitions[0].error_code is ErrorCode.none
    assert (await call(broker, _fetch(broker, 4))).error_code is ErrorCode.share_session_not_found
    share_partition = coordinator.share.partitions.get(("g", "t", 0))
    assert share_partition is not None and share_partition.spso == 2
    assert accepted_records == [("t", 0, 2)]  # neither the refused batch nor the released one


async def test_describe_and_list_show_the_share_group(
    share_broker: tuple[BrokerService, GroupCoordinator],
) -> None:
    _, coordinator = share_broker
    await call(coordinator, _heartbeat("m1", 0, ["t"]))
    described = await call(
        coordinator, request(77, 1, group_ids=["g", "nope"], include_authorized_operations=False)
    )
    share, missing = described.groups
    assert (share.group_state, [m.member_id for m in share.members]) == ("Stable", ["m1"])
    assert missing.error_code is ErrorCode.group_id_not_found
    listed = await call(coordinator, request(16, 5, states_filter=[], types_filter=["share"]))
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("g", "share")]
    classic = await call(coordinator, request(15, 5, groups=["g"], include_authorized_operations=False))
    assert classic.groups[0].protocol_type == "share"
    # One id, one group type: a consumer group heartbeat for the share group's id is refused.
    consumer = request(68, 1, group_id="g", member_id="c1", member_epoch=0, rebalance_timeout=1000,
                       subscribed_topic_names=["t"], topic_partitions=[])  # fmt: skip
    assert (await call(coordinator, consumer)).error_code is ErrorCode.group_id_not_found


def _describe_offsets(topics: list[dict[str, Any]] | None = None) -> Any:
    return request(90, 1, groups=[{"group_id": "g", "topics": topics}])


async def test_share_group_offsets_are_described_altered_and_deleted(
    share_broker: tuple[BrokerService, GroupCoordinator],
) -> None:
    broker, coordinator = share_broker
    missing = await call(coordinator, _describe_offsets())
    assert missing.groups[0].error_code is ErrorCode.group_id_not_found
    await call(coordinator, _heartbeat("m1", 0, ["t"]))
    await call(broker, _fetch(broker, 0))
    await call(broker, _ack(broker, 1, 0, 1, 1))
    (group,) = (await call(coordinator, _describe_offsets())).groups
    (partition,) = group.topics[0].partitions
    assert (group.topics[0].topic_name, partition.start_offset, partition.lag) == ("t", 2, 2)
    alter = request(
        91,
        0,
        group_id="g",
        topics=[{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]}],
    )
    assert (await call(coordinator, alter)).error_code is ErrorCode.non_empty_group
    await call(coordinator, _heartbeat("m1", -1))
    assert (await call(coordinator, alter)).responses[0].partitions[0].error_code is ErrorCode.none
    asked = await call(coordinator, _describe_offsets([{"topic_name": "t", "partitions": [0]}]))
    assert asked.groups[0].topics[0].partitions[0].start_offset == 0
    deleted = await call(coordinator, request(92, 0, group_id="g", topics=[{"topic_name": "t"}]))
    assert deleted.error_code is ErrorCode.none and deleted.responses[0].error_code is ErrorCode.none
    assert (await call(coordinator, _describe_offsets())).groups[0].topics == ()
    await call(coordinator, _heartbeat("m2", 0, ["t"]))
    await call(coordinator, _heartbeat("m2", -1))
    gone = await call(coordinator, request(42, 2, groups_names=["g"]))
    assert gone.results[0].error_code is ErrorCode.none
    assert not await coordinator.share.exists("g")


async def test_two_first_fetches_racing_share_one_share_partition(
    share_broker: tuple[BrokerService, GroupCoordinator],
) -> None:
    """Two members' first fetches of a new share-partition at once: one initializes it, the other
    uses it (each making its own would hand the same records to both)."""
    broker, coordinator = share_broker
    await call(coordinator, _heartbeat("m1", 0, ["t"]))
    await call(coordinator, _heartbeat("m2", 0, ["t"]))
    answers = await asyncio.gather(
        call(broker, _fetch(broker, 0)), call(broker, _fetch(broker, 0, member="m2"))
    )
    acquired = [
        offset
        for answer in answers
        for topic in answer.responses
        for partition in topic.partitions
        for r in partition.acquired_records
        for offset in range(r.first_offset, r.last_offset + 1)
    ]
    assert sorted(acquired) == [0, 1, 2, 3]


async def test_a_deleted_topics_share_state_goes_with_it(
    share_broker: tuple[BrokerService, GroupCoordinator],
) -> None:
    broker, coordinator = share_broker
    await call(coordinator, _heartbeat("m1", 0, ["t"]))
    await call(broker, _fetch(broker, 0))
    await coordinator.share.partitions.flush([("g", "t", 0)])
    assert await coordinator.share.partitions.stored("g")
    await coordinator.share.partitions.delete_topic("t")
    assert await coordinator.share.partitions.stored("g") == {}
