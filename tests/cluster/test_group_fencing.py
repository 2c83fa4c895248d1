"""Group state belongs to the broker leading the group's coordinator slot: a broker restarted while
another serves the group neither loads it nor expires its members (issue 26: the restarted brokers
saved "Empty, generation 2" over a group served at generation 1 with both members)."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from confluent_kafka import Consumer, Producer

from tabletopic import database
from tabletopic.broker.groups.store import GroupStore
from tabletopic.broker.leadership import GROUP_SLOTS_TOPIC, group_slot
from tabletopic.cluster.db import ClusterMetadata, partitions_table
from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, find_coordinator, new_topic, wait_until

pytestmark = CLUSTER_TEST_MARKS

SESSION_MS = 4000  # the brokers' group.min.session.timeout.ms: members a stale timer would expire soonest


@contextmanager
def _members(bootstrap: str, group: str, topic: str, count: int) -> Iterator[list[threading.Thread]]:
    """``count`` consumers polling in their own threads (so they keep heartbeating to their
    coordinator); each commits the first record of each partition it gets, then never again."""
    stop = threading.Event()

    def run() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
            }
        )
        consumer.subscribe([topic])
        committed: set[int] = set()
        try:
            while not stop.is_set():
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None and msg.partition() not in committed:
                    consumer.commit(msg, asynchronous=False)
                    committed.add(msg.partition())
        finally:
            consumer.close()

    threads = [threading.Thread(target=run, name=f"member-{i}", daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        yield threads
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)


def _unchanged(read: Callable[[], Any], expected: Any, seconds: float, interval: float = 0.2) -> None:
    """Read again and again for ``seconds`` that ``read()`` still gives ``expected``: showing that
    something does *not* happen takes watching for as long as it would take to happen."""
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        value = read()
        assert value == expected, f"rewritten {elapsed:.1f} s after the restart: {value} (was {expected})"
        time.sleep(interval)  # the subject: watching that something does not happen


def test_a_restarted_broker_does_not_rewrite_a_group_another_broker_coordinates(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic, _ = new_topic(cluster, "fenced", 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    engine = database.create_engine(cluster.metadata_url)
    store = GroupStore(engine)

    def stored() -> tuple[Any, Any]:
        """The group's row with its members, and its committed offsets, as the database holds them."""
        groups, offsets, _ = store.load()
        return next((g for g in groups if g.group_id == group), None), offsets.get(group, {})

    def settled() -> tuple[Any, Any] | None:
        state = stored()
        return state if state[0] is not None and len(state[0].members) == 2 and len(state[1]) == 2 else None

    try:
        with _members(cluster.bootstrap, group, topic, 2):
            # Both members in the group as its coordinator wrote it, each partition's offset committed.
            before = wait_until(settled, timeout=60)
            coordinator = find_coordinator(cluster, 1, group, key_type=0)
            # The slot stays where it is: balancing could otherwise give it to the restarted
            # broker, which would then rightly coordinate the group (and the test show nothing).
            slot = group_slot(group, int(cluster.overrides(1)["offsets.topic.num.partitions"]))
            ClusterMetadata(engine).request_moves([(GROUP_SLOTS_TOPIC, slot, coordinator)], pin=True)
            controller = cluster.metadata(1).controller_id
            other = next(n for n in (1, 2, 3) if n not in (coordinator, controller))
            broker = cluster.brokers[other]
            assert broker.process is not None
            os.kill(broker.process.pid, signal.SIGKILL)
            broker.process.wait(10)
            broker.process = None
            cluster.start(other)
            wait_until(lambda: len(cluster.metadata(other).brokers) == 3, timeout=30)
            # A broker that loaded the group at start would expire both members one session
            # timeout after loading them and save the group Empty at the next generation.
            _unchanged(stored, before, seconds=2 * SESSION_MS / 1000)
            assert find_coordinator(cluster, other, group, key_type=0) == coordinator
    finally:
        p = partitions_table
        with engine.begin() as conn:  # later tests' balancing may move every slot again
            conn.execute(sa.update(p).where(p.c.topic == GROUP_SLOTS_TOPIC).values(pinned=False))
        engine.dispose()
