"""A KIP-932 share group (confluent-kafka ``ShareConsumer``) on a 3-broker cluster across the death
of the broker that is both its group coordinator and its partition's leader: the members join the
coordinator that takes the group's slot over; the share-partition state lives in the metadata
database, and the new leader reads it when it first serves the partition (claiming it with its
leader epoch), so acknowledged records are not delivered again and records acquired but not
acknowledged are, with their delivery count kept."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from confluent_kafka import ShareConsumer

from tabletopic import database
from tabletopic.broker.groups.share_store import ShareStateStore
from tests.support.cluster import (
    CLUSTER_TEST_MARKS,
    LocalCluster,
    find_coordinator,
    move_with_cli,
    new_topic,
    wait_until,
)
from tests.support.kafka_clients import poll_share, produce_values, share_group_starts_earliest

pytestmark = [*CLUSTER_TEST_MARKS, pytest.mark.timeout(300)]


def _stored_delivery_count(cluster: LocalCluster, group: str, topic: str, offset: int) -> int | None:
    engine = database.create_engine(cluster.metadata_url)
    try:
        stored = ShareStateStore(engine).load_one((group, topic, 0))
    finally:
        engine.dispose()
    if stored is None:
        return None
    return next((r.delivery_count for r in stored[0].ranges if r.first <= offset <= r.last), None)


def test_share_group_survives_its_coordinator_and_partition_leader_dying(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "share", 1)
    group = f"share-{uuid.uuid4().hex[:6]}"
    old_leader = find_coordinator(cluster, 1, group, key_type=0)
    if leaders[0][0] != old_leader:  # one kill for both failovers
        move_with_cli(cluster, topic, 0, old_leader, via=1)
        wait_until(lambda: cluster.leaders(topic)[0][0] == old_leader, timeout=30)
    share_group_starts_earliest({"bootstrap.servers": cluster.bootstrap}, group)
    produce_values(cluster.bootstrap, topic, [f"a{i}" for i in range(20)])

    first = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    first.subscribe([topic])
    accepted = poll_share(first, 20)
    first.commit_sync()
    first.close()
    assert sorted(m.offset() for m in accepted) == list(range(20))

    produce_values(cluster.bootstrap, topic, [f"b{i}" for i in range(10)])
    # Another broker's admin API asks the coordinator for the share partition's start and lag.
    other = next(n for n in (1, 2, 3) if n != old_leader)

    def progress() -> list[tuple[int, int | None, int | None]]:
        found = httpx.get(f"{cluster.brokers[other].admin_url}/v1/groups/{group}", timeout=30).json()
        return [(o["partition"], o["committed"], o["lag"]) for o in found["offsets"]]

    wait_until(lambda: progress() == [(0, 20, 10)], timeout=30)
    holder = ShareConsumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    holder.subscribe([topic])
    held = poll_share(holder, 10)
    assert sorted(m.offset() for m in held) == list(range(20, 30))
    wait_until(lambda: _stored_delivery_count(cluster, group, topic, 29) == 1, timeout=30)

    cluster.brokers[old_leader].kill()
    wait_until(
        lambda: cluster.leaders(topic)[0][0] not in (old_leader, -1),
        timeout=90,
        interval=0.5,
    )

    fresh = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        fresh.subscribe([topic])
        again = poll_share(fresh, 10, seconds=120, skip_errors=True)
        assert sorted((m.offset(), m.delivery_count()) for m in again) == [(o, 2) for o in range(20, 30)]
        fresh.commit_sync()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert [m for m in fresh.poll(0.5) if m.error() is None] == []
    finally:
        fresh.close()
