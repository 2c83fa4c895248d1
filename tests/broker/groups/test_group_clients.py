"""Real Kafka clients in consumer groups against a real ``tabletopic serve`` (the shared broker of
``tests/broker/conftest.py``).

* three confluent-kafka consumers joining and leaving one group while it consumes, with manual
  synchronous commits: every message is consumed exactly once across the rebalances, for the eager
  (range, roundrobin) and the cooperative (cooperative-sticky) protocols;
* kafka-python and aiokafka group consumers committing (with metadata) and a second consumer of the
  same group resuming from the committed offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.support import kafka_clients as clients
from tests.support.broker_process import BrokerProcess
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]


def _produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    messages = [(i % partitions, f"k{i}".encode(), f"v{i}".encode(), ()) for i in range(count)]
    clients.confluent_produce(bootstrap, topic, messages, "none", idempotent=False)


class _GroupMember(threading.Thread):
    """One confluent-kafka consumer: consume small batches slowly, record, commit synchronously after
    each batch and before any partition is taken away."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, strategy: str, seen: list[tuple[int, int]]
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.group, self.strategy = bootstrap, topic, group, strategy
        self.seen = seen
        self.leave = threading.Event()
        self.errors: list[BaseException] = []
        self.consumed = 0

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": self.strategy,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 300,
                "fetch.queue.backoff.ms": 1,
            }
        )

        def commit() -> None:
            # Between JoinGroup and SyncGroup the coordinator answers REBALANCE_IN_PROGRESS, and a
            # commit that still carries the previous generation (a cooperative member that has not
            # seen its SyncGroup answer yet) ILLEGAL_GENERATION, both as Kafka does. librdkafka
            # finishes the rebalance in its own thread and the next commit carries the new
            # generation, so retrying is what an application does; the exactly-once assertion
            # below still catches any record a lost commit would deliver twice.
            for _ in range(100):
                try:
                    consumer.commit(asynchronous=False)
                    return
                except KafkaException as exc:
                    if "NO_OFFSET" in str(exc):
                        return
                    if "REBALANCE_IN_PROGRESS" not in str(exc) and "ILLEGAL_GENERATION" not in str(exc):
                        raise
                    time.sleep(0.05)  # an application's retry back-off, not a wait for a condition
            raise AssertionError("commit kept failing with REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION")

        def on_revoke(_consumer: object, _partitions: object) -> None:
            commit()

        try:
            consumer.subscribe([self.topic], on_revoke=on_revoke)
            while not self.leave.is_set():
                batch = consumer.consume(num_messages=20, timeout=0.2)
                for message in batch:
                    assert message.error() is None, message.error()
                    self.seen.append((message.partition(), message.offset()))
                    self.consumed += 1
                if batch:
                    commit()
                    time.sleep(0.05)  # the subject: a slow consumer, so rebalances happen mid-stream
            commit()
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)
        finally:
            consumer.close()


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_group_consumes_every_message_exactly_once_while_members_join_and_leave(
    bootstrap: str, strategy: str
) -> None:
    topic, group = f"exact-{strategy}-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    partitions, total = 6, 2400
    clients.create_topic(bootstrap, topic, partitions)
    _produce(bootstrap, topic, partitions, total)
    seen: list[tuple[int, int]] = []
    members: list[_GroupMember] = []

    def wait_for(count: int, timeout: float = 90) -> None:
        def reached_or_failed() -> bool:
            return len(seen) >= count or any(m.errors for m in members)

        with contextlib.suppress(TimeoutError):  # the assertions below say what went wrong
            wait_until_sync(reached_or_failed, timeout=timeout, interval=0.05)
        errors = [e for m in members for e in m.errors]
        assert not errors, errors
        assert len(seen) >= count, f"stuck at {len(seen)} of {count}"

    def start() -> _GroupMember:
        member = _GroupMember(bootstrap, topic, group, strategy, seen)
        members.append(member)
        member.start()
        return member

    first = start()
    wait_for(400)
    start()
    wait_for(900)
    start()
    wait_for(1400)
    first.leave.set()  # leaves mid-stream; its partitions move to the others
    first.join(30)
    wait_for(total)
    time.sleep(1)  # the subject: watching that nothing more comes (a record delivered twice would)
    for member in members:
        member.leave.set()
    for member in members:
        member.join(30)
    assert not [e for m in members for e in m.errors]
    assert all(m.consumed > 0 for m in members), [m.consumed for m in members]  # all took part
    counts = Counter(seen)
    duplicates = {k: v for k, v in counts.items() if v > 1}
    assert not duplicates, f"{len(duplicates)} messages consumed more than once"
    expected = {(p, o) for p in range(partitions) for o in range(total // partitions)}
    assert set(counts) == expected


def test_kafka_python_group_commits_with_metadata_and_a_new_consumer_resumes(bootstrap: str) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, group = f"kp-{uuid.uuid4().hex[:6]}", f"kp-{uuid.uuid4().hex[:6]}"
    clients.create_topic(bootstrap, topic, 2)
    _produce(bootstrap, topic, 2, 100)

    def consumer() -> KafkaConsumer:
        return KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        )

    first = consumer()
    taken: dict[int, int] = {}  # partition -> next offset
    deadline = time.monotonic() + 60
    while sum(taken.values()) < 60 and time.monotonic() < deadline:
        for tp, records in first.poll(timeout_ms=500, max_records=10).items():
            for record in records:
                taken[tp.partition] = record.offset + 1
    assert sum(taken.values()) >= 60
    first.commit({TopicPartition(topic, p): OffsetAndMetadata(o, f"meta-{p}", -1) for p, o in taken.items()})
    committed = first.committed(TopicPartition(topic, 0), metadata=True)
    assert committed is not None and committed.offset == taken.get(0, 0) and committed.metadata == "meta-0"
    first.close()

    second = consumer()
    rest: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    while len(rest) < 100 - sum(taken.values()) and time.monotonic() < deadline:
        for tp, records in second.poll(timeout_ms=500).items():
            rest.extend((tp.partition, r.offset) for r in records)
    second.close()
    assert sorted(rest) == sorted((p, o) for p in (0, 1) for o in range(taken.get(p, 0), 50))


def test_aiokafka_group_commits_and_a_new_consumer_resumes(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    topic, group = f"aio-{uuid.uuid4().hex[:6]}", f"aio-{uuid.uuid4().hex[:6]}"
    clients.create_topic(bootstrap, topic, 2)
    _produce(bootstrap, topic, 2, 100)

    def consumer() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        )

    async def run() -> None:
        first = consumer()
        await first.start()
        taken: dict[int, int] = {}
        try:
            async with asyncio.timeout(60):
                while sum(taken.values()) < 60:
                    for tp, records in (await first.getmany(timeout_ms=500, max_records=10)).items():
                        for record in records:
                            taken[tp.partition] = record.offset + 1
            offsets = {TopicPartition(topic, p): OffsetAndMetadata(o, f"m{p}") for p, o in taken.items()}
            await first.commit(offsets)
            assert await first.committed(TopicPartition(topic, 1)) == taken.get(1)
        finally:
            await first.stop()

        second = consumer()
        await second.start()
        rest: list[tuple[int, int]] = []
        try:
            async with asyncio.timeout(60):
                while len(rest) < 100 - sum(taken.values()):
                    for tp, records in (await second.getmany(timeout_ms=500)).items():
                        rest.extend((tp.partition, r.offset) for r in records)
        finally:
            await second.stop()
        assert sorted(rest) == sorted((p, o) for p in (0, 1) for o in range(taken.get(p, 0), 50))

    asyncio.run(run())


def test_confluent_static_member_restart_keeps_its_partitions_without_a_rebalance(bootstrap: str) -> None:
    from confluent_kafka import Consumer

    topic, group = f"static-{uuid.uuid4().hex[:6]}", f"static-{uuid.uuid4().hex[:6]}"
    clients.create_topic(bootstrap, topic, 4)
    assignments: dict[str, list[set[int]]] = {"a": [], "b": [], "a again": []}

    def consumer(name: str, instance: str = "") -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.instance.id": f"instance-{instance or name}",
                "session.timeout.ms": 30_000,
                "heartbeat.interval.ms": 300,
                "enable.auto.commit": False,
            }
        )
        c.subscribe(
            [topic], on_assign=lambda _c, parts: assignments[name].append({p.partition for p in parts})
        )
        return c

    def poll_until(condition: object, *members: Consumer, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
            for member in members:
                member.poll(0.1)
        assert condition(), assignments  # type: ignore[operator]

    def split_between_both() -> bool:
        if not (assignments["a"] and assignments["b"]):
            return False
        mine, theirs = assignments["a"][-1], assignments["b"][-1]
        return len(mine) + len(theirs) == 4 and not mine & theirs and bool(mine) and bool(theirs)

    # Every consumer is closed whatever fails, within a bound (close_within): a failed assertion
    # leaves no member polling, heartbeating or waiting in a close into the tests after it.
    a, b = consumer("a"), consumer("b")
    restarted = None
    try:
        poll_until(split_between_both, a, b)
        a_partitions = assignments["a"][-1]
        b_rounds = len(assignments["b"])
        a.close()  # a static member does not leave the group on close
        a = None
        # The same instance id under a new client, whose own assignment is waited for: a's list
        # may hold two rounds already (all four partitions, then the split).
        restarted = consumer("a again", instance="a")
        poll_until(lambda: bool(assignments["a again"]), restarted, b)
        for _ in range(10):
            b.poll(0.1)
        assert assignments["a again"] == [a_partitions]
        assert len(assignments["b"]) == b_rounds, "the other member saw a rebalance"
    finally:
        clients.close_within(*(c for c in (a, restarted, b) if c is not None))


def test_confluent_admin_lists_describes_alters_and_deletes_groups(bootstrap: str) -> None:
    from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import AdminClient

    topic, group = f"adm-{uuid.uuid4().hex[:6]}", f"adm-{uuid.uuid4().hex[:6]}"
    clients.create_topic(bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "adm-client",
            "enable.auto.commit": False,
        }
    )
    assigned: list[int] = []
    try:
        consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(p.partition for p in parts))
        deadline = time.monotonic() + 60
        while len(assigned) < 2 and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert sorted(assigned) == [0, 1]
        consumer.commit(offsets=[TP(topic, 0, 7), TP(topic, 1, 3)], asynchronous=False)

        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.state == ConsumerGroupState.STABLE
        [member] = described.members
        assert member.client_id == "adm-client"
        assert sorted(p.partition for p in member.assignment.topic_partitions) == [0, 1]
        listed = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(30)
        assert group in {g.group_id for g in listed.valid}
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups([group])[group].result(30)
    finally:
        clients.close_within(consumer)  # whatever failed, as in the static member test
    request = [ConsumerGroupTopicPartitions(group, [TP(topic, 0)])]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TP(topic, 0, 11)])])[
        group
    ].result(30)
    offsets = admin.list_consumer_group_offsets(request)[group].result(30)
    assert [(p.partition, p.offset) for p in offsets.topic_partitions] == [(0, 11)]
    assert admin.describe_consumer_groups([group])[group].result(30).state == ConsumerGroupState.EMPTY

    admin.delete_consumer_groups([group])[group].result(30)
    listed = admin.list_consumer_groups().result(30)
    assert group not in {g.group_id for g in listed.valid}


def test_group_and_offsets_survive_a_broker_kill_without_a_rebalance(tmp_path: Path) -> None:
    """SIGKILL the broker under a live group: the member keeps its generation and partitions once
    the broker is back (membership was persisted), and acknowledged commits are all there."""
    from confluent_kafka import Consumer

    broker = BrokerProcess(tmp_path / "broker").start()
    try:
        bootstrap = broker.bootstrap
        topic, group = "restart-topic", "restart-group"
        clients.create_topic(bootstrap, topic, 2)
        _produce(bootstrap, topic, 2, 100)
        rounds: list[set[int]] = []
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 45_000,
                "heartbeat.interval.ms": 500,
            }
        )
        try:
            consumer.subscribe([topic], on_assign=lambda _c, ps: rounds.append({p.partition for p in ps}))
            seen: list[tuple[int, int]] = []
            deadline = time.monotonic() + 60
            while len(seen) < 40 and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=10, timeout=0.2):
                    seen.append((message.partition(), message.offset()))
            consumer.commit(asynchronous=False)
            committed = {p: max(o for q, o in seen if q == p) + 1 for p, _ in seen}

            broker.kill()
            broker.start()

            deadline = time.monotonic() + 90
            while len(seen) < 100 and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=10, timeout=0.2):
                    assert message.error() is None, message.error()
                    seen.append((message.partition(), message.offset()))
            assert sorted(seen) == sorted((p, o) for p in (0, 1) for o in range(50))
            assert rounds == [{0, 1}], "the group rebalanced across the restart"
            from confluent_kafka import TopicPartition as TP

            stored = consumer.committed([TP(topic, 0), TP(topic, 1)], timeout=30)
            assert {tp.partition: tp.offset for tp in stored} == {p: committed.get(p, -1001) for p in (0, 1)}
        finally:
            clients.close_within(consumer)  # whatever failed, before the broker stops
    finally:
        broker.stop()


def test_aiokafka_members_split_partitions_and_the_survivor_takes_over(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer

    topic, group = f"aio2-{uuid.uuid4().hex[:6]}", f"aio2-{uuid.uuid4().hex[:6]}"
    clients.create_topic(bootstrap, topic, 4)

    def consumer() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=300,
        )

    async def settle(*members: AIOKafkaConsumer, expect: list[int]) -> list[set[int]]:
        async with asyncio.timeout(60):
            while True:
                await asyncio.gather(*(m.getmany(timeout_ms=100) for m in members))
                owned = [{tp.partition for tp in m.assignment()} for m in members]
                if sorted(len(o) for o in owned) == expect and set().union(*owned) == {0, 1, 2, 3}:
                    return owned

    async def run() -> None:
        first, second = consumer(), consumer()
        await first.start()
        await second.start()
        try:
            owned = await settle(first, second, expect=[2, 2])
            assert not owned[0] & owned[1]
        finally:
            await second.stop()  # leaves the group
        try:
            await settle(first, expect=[4])
        finally:
            await first.stop()

    asyncio.run(run())
