"""confluent-kafka consumers with ``group.protocol=consumer`` (KIP-848) against a real
``tabletopic serve``: members joining, leaving and being killed while the group consumes, every
record consumed once and the committed offsets at the end of each partition; a regex subscription
picking up a topic created later; a classic member in the same group; a static member restarting
within its session; the group shown with its type by the admin APIs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import kafka_clients as clients
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import wait_until
from tests.support.group_member import committed_offsets

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

SESSION_TIMEOUT_MS = 6000
# The module's broker (the ``node`` fixture): rebalances and the fencing of a killed member take seconds.
NODE_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
}


@pytest.fixture(scope="module")
def bootstrap(node: BrokerProcess) -> str:
    """The module's broker (``node``, in the conftest), not the session's shared one."""
    return node.bootstrap


def _config(bootstrap: str, group: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 1,
    }


def _commit(consumer: object, message: object) -> None:
    """Commit one record synchronously; a commit racing an epoch bump is retried, as librdkafka
    applications do (the next attempt carries the new member epoch)."""
    from confluent_kafka import KafkaException

    for _ in range(100):
        try:
            consumer.commit(message, asynchronous=False)  # type: ignore[attr-defined]
            return
        except KafkaException as exc:
            if not any(
                e in str(exc) for e in ("STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION")
            ):
                raise
            time.sleep(0.05)  # a retry's backoff, as a client's: the member rejoins meanwhile
    raise AssertionError("commit kept failing with STALE_MEMBER_EPOCH")


class _Member(threading.Thread):
    """A consumer that commits each record before taking the next, so a partition moving away
    never delivers a record twice."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, seen: list[tuple[int, int]], classic: bool = False
    ) -> None:
        super().__init__(daemon=True)
        self.config, self.topic, self.seen = _config(bootstrap, group), topic, seen
        if classic:  # a classic member (JoinGroup/SyncGroup) in the same group
            self.config.update({"group.protocol": "classic", "heartbeat.interval.ms": 300})
        self.leave = threading.Event()
        self.errors: list[BaseException] = []
        self.assigned: list[Any] = []

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(self.config)
        try:
            consumer.subscribe([self.topic])
            while not self.leave.is_set():
                message = consumer.poll(0.1)
                self.assigned = consumer.assignment()
                if message is None:
                    continue
                assert message.error() is None, message.error()
                _commit(consumer, message)
                self.seen.append((int(message.partition() or 0), int(message.offset() or 0)))
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)
        finally:
            consumer.close()  # leaves the group (member epoch -1)


_KILLED_MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                         "group.protocol": "consumer", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([sys.argv[3]])
    while True:
        consumer.poll(0.1)
        if consumer.assignment():
            print("assigned", flush=True)
    """
)


def _produce(bootstrap: str, topic: str, partitions: int, start: int, count: int) -> None:
    messages = [(i % partitions, f"k{i}".encode(), f"v{i}".encode(), ()) for i in range(start, start + count)]
    clients.confluent_produce(bootstrap, topic, messages, "none", idempotent=False)


def test_members_joining_leaving_and_killed_consume_every_record_once(bootstrap: str, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    topic, group = f"kip848-{uuid.uuid4().hex[:6]}", f"g848-{uuid.uuid4().hex[:6]}"
    partitions, batch = 6, 60
    clients.create_topic(bootstrap, topic, partitions)
    seen: list[tuple[int, int]] = []
    members: list[_Member] = []
    produced = 0

    def start() -> _Member:
        member = _Member(bootstrap, topic, group, seen)
        members.append(member)
        member.start()
        return member

    def produce_and_consume() -> None:
        nonlocal produced
        _produce(bootstrap, topic, partitions, produced, batch)
        produced += batch

        def done() -> bool:
            errors = [e for m in members for e in m.errors]
            assert not errors, errors
            return len(seen) >= produced

        wait_until(done, timeout=90)

    # Every member leaves whatever fails: a member thread left polling would stay in the group,
    # and in the module's broker, through the tests after this one.
    try:
        first, second = start(), start()
        produce_and_consume()  # two members
        third = start()
        wait_until(lambda: third.assigned, timeout=60)
        produce_and_consume()  # a third joined and took partitions over
        first.leave.set()
        first.join(30)
        wait_until(lambda: len(second.assigned) + len(third.assigned) == partitions, timeout=60)
        produce_and_consume()  # one left; the others own everything again

        killed = subprocess.Popen(
            [sys.executable, "-c", _KILLED_MEMBER, bootstrap, group, topic],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            assert killed.stdout is not None and killed.stdout.readline().strip() == b"assigned"
            os.kill(killed.pid, signal.SIGKILL)  # no leave: its partitions wait for the session timeout
        finally:
            killed.kill()
            killed.wait(10)
        produce_and_consume()  # the survivors took the killed member's partitions after its session
    finally:
        for member in members:
            member.leave.set()
        for member in members:
            member.join(30)
    assert not [e for m in members for e in m.errors]
    counts = Counter(seen)
    assert not {k: v for k, v in counts.items() if v > 1}, "records consumed more than once"
    assert set(counts) == {(p, o) for p in range(partitions) for o in range(produced // partitions)}

    # The committed offsets are at the end of every partition, read back by a classic consumer.
    committed = committed_offsets(bootstrap, group, topic, range(partitions))
    assert list(committed.values()) == [produced // partitions] * partitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(timeout=10)
    assert group in {g.group_id for g in listed.valid}


@pytest.mark.parametrize(
    "classic_first",
    [
        pytest.param(False, id="a classic member joins a consumer group"),
        pytest.param(True, id="a consumer member upgrades a classic group"),
    ],
)
def test_classic_and_consumer_members_share_a_group_and_every_record_is_consumed_once(
    bootstrap: str, classic_first: bool
) -> None:
    """Kafka 4's mixed groups, both ways: the first member owns every partition and is reading,
    a member of the other protocol joins and gets its share (a classic member through SyncGroup
    once the other released it; a consumer member by upgrading the classic group, whose member
    stays and gives up a share), and after the first leaves the second has every partition."""
    topic, group = f"mixed-{uuid.uuid4().hex[:6]}", f"gmix-{uuid.uuid4().hex[:6]}"
    partitions = 4
    clients.create_topic(bootstrap, topic, partitions)
    seen: list[tuple[int, int]] = []
    first = _Member(bootstrap, topic, group, seen, classic=classic_first)
    second = _Member(bootstrap, topic, group, seen, classic=not classic_first)
    first.start()
    try:
        wait_until(lambda: len(first.assigned) == partitions, timeout=60)
        _produce(bootstrap, topic, partitions, 0, 40)
        wait_until(lambda: len(seen) >= 40, timeout=60)
        second.start()
        wait_until(
            lambda: (
                first.assigned
                and second.assigned
                and len(first.assigned) + len(second.assigned) == partitions
            ),
            timeout=60,
        )
        _produce(bootstrap, topic, partitions, 40, 40)
        wait_until(lambda: len(seen) >= 80, timeout=60)
        first.leave.set()
        first.join(30)
        wait_until(lambda: len(second.assigned) == partitions, timeout=60)
        _produce(bootstrap, topic, partitions, 80, 40)
        wait_until(lambda: len(seen) >= 120, timeout=60)
    finally:
        for member in (first, second):
            member.leave.set()
            if member.is_alive():
                member.join(30)
    assert not first.errors and not second.errors, first.errors + second.errors
    counts = Counter(seen)
    assert not {k: v for k, v in counts.items() if v > 1}, "records consumed more than once"
    assert set(counts) == {(p, o) for p in range(partitions) for o in range(120 // partitions)}


def test_regex_subscription_picks_up_a_topic_created_later(bootstrap: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    prefix = f"rx{uuid.uuid4().hex[:6]}"
    group = f"g-{prefix}"
    clients.create_topic(bootstrap, f"{prefix}-a", 2)
    _produce(bootstrap, f"{prefix}-a", 2, 0, 10)
    consumer = Consumer(_config(bootstrap, group))
    consumer.subscribe([f"^{prefix}-.*"])
    got: Counter[str] = Counter()
    try:

        def consumed(topic: str, count: int) -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got[str(message.topic())] += 1
            return got[topic] >= count

        wait_until(lambda: consumed(f"{prefix}-a", 10), timeout=60, interval=0)
        # While the member is in the group, show it as a "consumer" type group.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(timeout=10)
        types = {g.group_id: str(g.type) for g in listed.valid}
        assert "CONSUMER" in types[group].upper()
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert "CONSUMER" in str(described.type).upper() and len(described.members) == 1
        assigned = described.members[0].assignment.topic_partitions
        assert {(tp.topic, tp.partition) for tp in assigned} == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}
        clients.create_topic(bootstrap, f"{prefix}-b", 1)
        _produce(bootstrap, f"{prefix}-b", 1, 0, 5)
        wait_until(lambda: consumed(f"{prefix}-b", 5), timeout=60, interval=0)
    finally:
        consumer.close()
    assert got == {f"{prefix}-a": 10, f"{prefix}-b": 5}


def test_static_member_restarting_within_its_session_gets_its_partitions_back(bootstrap: str) -> None:
    from confluent_kafka import Consumer

    topic, group = f"static-{uuid.uuid4().hex[:6]}", f"gst-{uuid.uuid4().hex[:6]}"
    clients.create_topic(bootstrap, topic, 4)

    def member(instance: str) -> Any:
        consumer = Consumer({**_config(bootstrap, group), "group.instance.id": instance})
        consumer.subscribe([topic])
        return consumer

    def owned(consumer: Any) -> set[int]:
        consumer.poll(0.1)
        return {tp.partition for tp in consumer.assignment()}

    # Every consumer is closed before the test ends, whatever fails: one left to the garbage
    # collector after the module's broker stopped blocks the whole run in librdkafka's destroy.
    first, other = member("instance-a"), member("instance-b")
    again = None
    try:
        # Both polled every round: a member applies a revocation only in its poll, so one left
        # unpolled (by a short-circuiting `and`) would keep its partitions from the other.
        wait_until(lambda: [len(owned(first)), len(owned(other))] == [2, 2], timeout=60, interval=0)
        before = owned(first)
        first.close()  # a static member leaves with epoch -2: its partitions wait for it
        first = None
        again = member("instance-a")
        wait_until(lambda: owned(again) == before, timeout=30, interval=0)
        assert owned(other) == {0, 1, 2, 3} - before  # the other member never saw a rebalance
    finally:
        for consumer in (first, again, other):
            if consumer is not None:
                consumer.close()


def test_a_consumer_group_is_listed_and_described_with_its_members_by_the_admin_api_and_cli(
    node: BrokerProcess,
) -> None:
    """`tabletopic groups` and the console's pages (the same /v1/groups) show a KIP-848 group with
    its members and their partitions, as they show a classic one: they read the single node's
    classic groups alone, and said 'no consumer groups' beside two members consuming."""
    from confluent_kafka import Consumer, TopicPartition

    topic, group = f"shown-{uuid.uuid4().hex[:6]}", f"gshown-{uuid.uuid4().hex[:6]}"
    clients.create_topic(node.bootstrap, topic, 3)
    _produce(node.bootstrap, topic, 3, 0, 30)
    members = [Consumer({**_config(node.bootstrap, group), "client.id": f"m{i}"}) for i in range(2)]
    admin = httpx.Client(base_url=node.admin_url, timeout=30)
    try:
        for member in members:
            member.subscribe([topic])

        def owned() -> list[set[int]]:
            for member in members:
                member.poll(0.1)
            return [{tp.partition for tp in m.assignment()} for m in members]

        wait_until(lambda: sorted(len(o) for o in owned()) == [1, 2], timeout=60, interval=0)
        for member in members:  # every record of each partition read: committed at its end
            mine = [TopicPartition(topic, tp.partition, 10) for tp in member.assignment()]
            member.commit(offsets=mine, asynchronous=False)
        listed = {g["group_id"]: g for g in admin.get("/v1/groups").json()}
        assert listed[group]["members"] == 2 and listed[group]["state"] == "Stable", listed.get(group)
        assert "KIP-848" in listed[group]["protocol_type"] and listed[group]["lag"] == 0
        described = admin.get(f"/v1/groups/{group}").json()
        assigned = sorted(p for m in described["members"] for p in m["assignment"][topic])
        assert assigned == [0, 1, 2] and {m["client_id"] for m in described["members"]} == {"m0", "m1"}
        assert [(o["partition"], o["committed"], o["lag"]) for o in described["offsets"]] == [
            (p, 10, 0) for p in range(3)
        ]
        shown = subprocess.run(
            [sys.executable, "-m", "tabletopic", "groups", "--admin-url", node.admin_url, "describe", group],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0 and "consumer (KIP-848)" in shown.stdout, shown.stdout + shown.stderr
    finally:
        admin.close()
        clients.close_within(*members)
