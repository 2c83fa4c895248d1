"""confluent-kafka ``ShareConsumer`` (KIP-932 share groups) against a real ``tabletopic serve``:
several members sharing one partition, explicit RELEASE/REJECT acknowledgements, the acquisition
lock of a killed member running out, the delivery count limit, and the share state surviving a
``kill -9`` of the node."""

from __future__ import annotations

import re
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
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa

from tabletopic.broker.groups.share_store import ShareStateStore
from tests.support import kafka_clients as clients
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

LOCK_MS = 3000
DELIVERY_LIMIT = 3
# The module's broker (the ``node`` fixture): a short acquisition lock and heartbeat interval, so
# that redeliveries take seconds.
NODE_OVERRIDES = {
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
    "group.share.heartbeat.interval.ms": "300",
    "group.share.session.timeout.ms": "6000",
}


@pytest.fixture(scope="module")
def bootstrap(node: BrokerProcess) -> str:
    """The module's broker (``node``, in the conftest), not the session's shared one."""
    return node.bootstrap


def _new_group_and_topic(bootstrap: str, prefix: str) -> tuple[str, str]:
    """A fresh topic, and a share group that starts at its earliest offset."""
    topic, group = f"{prefix}-{uuid.uuid4().hex[:6]}", f"{prefix}-g-{uuid.uuid4().hex[:6]}"
    clients.create_topic(bootstrap, topic, 1)
    clients.share_group_starts_earliest({"bootstrap.servers": bootstrap}, group)
    return topic, group


def _share_consumer(bootstrap: str, group: str, explicit: bool = False) -> Any:
    from confluent_kafka import ShareConsumer

    config: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    return ShareConsumer(config)


def _poll(consumer: Any, timeout: float = 0.5) -> list[Any]:
    messages = []
    for message in consumer.poll(timeout):
        assert message.error() is None, message.error()
        messages.append(message)
    return messages


class _Member(threading.Thread):
    """An implicit-mode share consumer: each poll accepts the records of the previous one."""

    def __init__(self, bootstrap: str, topic: str, group: str, seen: list[tuple[str, int, int]]) -> None:
        super().__init__(daemon=True)
        self.name_ = uuid.uuid4().hex[:6]
        self.bootstrap, self.topic, self.group, self.seen = bootstrap, topic, group, seen
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        consumer = _share_consumer(self.bootstrap, self.group)
        try:
            consumer.subscribe([self.topic])
            while not self.stop.is_set():
                for message in _poll(consumer, 0.2):
                    self.seen.append((self.name_, int(message.offset()), int(message.delivery_count() or 0)))
            consumer.commit_sync()
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)
        finally:
            consumer.close()


def test_three_members_share_one_partition_and_each_record_is_delivered_once(bootstrap: str) -> None:
    topic, group = _new_group_and_topic(bootstrap, "share3")
    seen: list[tuple[str, int, int]] = []
    members = [_Member(bootstrap, topic, group, seen) for _ in range(3)]
    for member in members:
        member.start()
    total = 0
    for wave in range(20):
        clients.produce_values(bootstrap, topic, [f"w{wave}-{i}" for i in range(10)])
        total += 10
        wait_until(lambda done=total - 10: len(seen) >= done, timeout=30)  # the members keep up
    wait_until(lambda: len(seen) >= total, timeout=60)
    for member in members:
        member.stop.set()
    for member in members:
        member.join(30)
        assert not member.errors, member.errors
    offsets = Counter(offset for _, offset, _ in seen)
    assert sorted(offsets) == list(range(total))
    twice = sorted(entry for entry in seen if offsets[entry[1]] > 1)
    assert not twice, f"delivered twice (member, offset, delivery count): {twice}"
    assert {delivery for _, _, delivery in seen} == {1}
    assert len({name for name, _, _ in seen}) >= 2, "one member got every record"


def test_release_redelivers_with_delivery_count_two_and_reject_never_redelivers(bootstrap: str) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = _new_group_and_topic(bootstrap, "shareack")
    clients.produce_values(bootstrap, topic, ["accept", "release", "reject"])
    consumer = _share_consumer(bootstrap, group, explicit=True)
    try:
        consumer.subscribe([topic])
        first = clients.poll_share(consumer, 1)
        kinds = {b"accept": AcknowledgeType.ACCEPT, b"release": AcknowledgeType.RELEASE}
        got = {m.value(): m for m in first}
        while len(got) < 3:
            batch = clients.poll_share(consumer, 1)
            got.update({m.value(): m for m in batch})
            first += batch
        for message in first:
            assert message.delivery_count() == 1
            consumer.acknowledge(message, kinds.get(message.value(), AcknowledgeType.REJECT))
        consumer.commit_sync()
        again = clients.poll_share(consumer, 1)
        assert [(m.value(), m.offset(), m.delivery_count()) for m in again] == [(b"release", 1, 2)]
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        # The rejected record is archived: nothing comes, even after a lock duration.
        deadline = time.monotonic() + LOCK_MS / 1000 + 1
        while time.monotonic() < deadline:
            assert _poll(consumer) == []
    finally:
        consumer.close()


_KILLED_MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([sys.argv[3]])
    while True:
        if len(consumer.poll(0.5)):
            print("acquired", flush=True)
            sys.stdin.read()  # hold the records, never acknowledge: the test kills this process
    """
)


def test_records_of_a_killed_member_are_redelivered_after_the_lock_times_out(bootstrap: str) -> None:
    topic, group = _new_group_and_topic(bootstrap, "sharelock")
    clients.produce_values(bootstrap, topic, [f"r{i}" for i in range(5)])
    killed = subprocess.Popen(
        [sys.executable, "-c", _KILLED_MEMBER, bootstrap, group, topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert killed.stdout is not None and killed.stdout.readline().strip() == b"acquired"
        killed.send_signal(signal.SIGKILL)  # no acknowledgement, no leave
        killed.wait(10)
        consumer = _share_consumer(bootstrap, group)
        try:
            consumer.subscribe([topic])
            started = time.monotonic()
            redelivered = clients.poll_share(consumer, 1, seconds=30)
            assert redelivered and all(m.delivery_count() == 2 for m in redelivered)
            # Not before the lock ran out (the member's session outlives its lock).
            assert time.monotonic() - started >= LOCK_MS / 1000 - 1.5
            redelivered += clients.poll_share(consumer, 5 - len(redelivered), seconds=30)
            assert sorted(m.offset() for m in redelivered) == list(range(5))
            consumer.commit_sync()
        finally:
            consumer.close()
    finally:
        if killed.poll() is None:
            killed.kill()


def test_a_record_released_too_often_is_archived_at_the_delivery_count_limit(bootstrap: str) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = _new_group_and_topic(bootstrap, "sharelimit")
    clients.produce_values(bootstrap, topic, ["poison"])
    consumer = _share_consumer(bootstrap, group, explicit=True)
    try:
        consumer.subscribe([topic])
        counts = []
        for _ in range(DELIVERY_LIMIT):
            (message,) = clients.poll_share(consumer, 1)
            counts.append(message.delivery_count())
            consumer.acknowledge(message, AcknowledgeType.RELEASE)
            consumer.commit_sync()
        assert counts == list(range(1, DELIVERY_LIMIT + 1))
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert _poll(consumer) == []
    finally:
        consumer.close()


def _stored_delivery_counts(data_dir: Path, group: str) -> dict[int, int]:
    """The delivery counts the node wrote for the group's partition 0 (read from its database)."""
    engine = sa.create_engine(f"sqlite:///{data_dir / 'metadata.db'}")
    try:
        snapshots = ShareStateStore(engine).load()
    except sa.exc.OperationalError:
        return {}
    finally:
        engine.dispose()
    counts: dict[int, int] = {}
    for (stored_group, _, partition), snapshot in snapshots.items():
        if stored_group == group and partition == 0:
            for run in snapshot.ranges:
                counts.update(dict.fromkeys(range(run.first, run.last + 1), run.delivery_count))
    return counts


def test_a_share_group_is_listed_and_described_with_its_members_by_the_admin_api_and_cli(
    node: BrokerProcess,
) -> None:
    """`tabletopic groups` and the console list a share group beside the consumer groups, and
    describe it with its members and each share partition's start offset and lag: librdkafka's
    admin API, which they read groups through, leaves share groups out, and a user of share groups
    saw none."""
    topic, group = _new_group_and_topic(node.bootstrap, "shown")
    clients.produce_values(node.bootstrap, topic, [f"v{i}" for i in range(10)])
    consumer = _share_consumer(node.bootstrap, group)
    admin = httpx.Client(base_url=node.admin_url, timeout=30)
    try:
        consumer.subscribe([topic])
        got: list[Any] = []
        wait_until(lambda: len(got.__iadd__(_poll(consumer))) >= 10, timeout=30, interval=0)
        consumer.commit_sync()  # the 10 records acknowledged: the share partition starts at 10
        clients.produce_values(node.bootstrap, topic, [f"w{i}" for i in range(5)])  # 5 to deliver
        listed = {g["group_id"]: g for g in admin.get("/v1/groups").json()}
        assert listed[group] == {
            "group_id": group,
            "state": "Stable",
            "protocol_type": "share",
            "members": 1,
            "lag": 5,
        }
        described = admin.get(f"/v1/groups/{quote(group, safe='')}").json()
        assert (described["protocol_type"], len(described["members"])) == ("share", 1)
        assert described["offsets"] == [
            {"topic": topic, "partition": 0, "committed": 10, "high_watermark": 15, "lag": 5}
        ]
        page = admin.get(f"/groups/{quote(group, safe='')}").text
        assert f"Share group {group}" in page and "<th>start offset</th>" in page
        assert f"<td>{topic}</td><td>0</td><td>10</td><td>15</td><td>5</td>" in page
        cli = [sys.executable, "-m", "tabletopic", "groups", "--admin-url", node.admin_url]
        shown = subprocess.run([*cli, "list"], capture_output=True, text=True, timeout=60)
        listing = shown.stdout + shown.stderr
        assert re.search(rf"^{group}\s+Stable\s+share\s+1\s+5$", shown.stdout, re.M), listing
        shown = subprocess.run([*cli, "describe", group], capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0 and "protocol share/" in shown.stdout, shown.stdout + shown.stderr
        assert "start offset" in shown.stdout and re.search(
            rf"^{topic}\s+0\s+10\s+15\s+5$", shown.stdout, re.M
        )
    finally:
        admin.close()
        consumer.close()


def test_share_state_survives_a_kill_9_of_the_node(tmp_path: Path) -> None:
    """Acknowledged records are not delivered again after the node was killed and restarted;
    records acquired but not acknowledged are, with their delivery count kept."""
    broker = BrokerProcess(tmp_path / "node", overrides=dict(NODE_OVERRIDES)).start()
    try:
        topic, group = _new_group_and_topic(broker.bootstrap, "sharekill")
        clients.produce_values(broker.bootstrap, topic, [f"a{i}" for i in range(10)])
        consumer = _share_consumer(broker.bootstrap, group)
        consumer.subscribe([topic])
        acked = clients.poll_share(consumer, 10)
        consumer.commit_sync()
        assert sorted(m.offset() for m in acked) == list(range(10))
        clients.produce_values(broker.bootstrap, topic, [f"b{i}" for i in range(5)])
        held = clients.poll_share(consumer, 5)  # acquired; the next poll or commit would accept them
        assert sorted(m.offset() for m in held) == list(range(10, 15))
        wait_until(lambda: _stored_delivery_counts(broker.data_dir, group).get(14) == 1, timeout=30)

        broker.kill()
        broker.start()

        fresh = _share_consumer(broker.bootstrap, group)
        try:
            fresh.subscribe([topic])
            again = clients.poll_share(fresh, 5, seconds=60)
            assert sorted((m.offset(), m.delivery_count()) for m in again) == [(o, 2) for o in range(10, 15)]
            fresh.commit_sync()
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                assert _poll(fresh) == []
        finally:
            fresh.close()
        try:
            consumer.close()  # its session died with the node: its acknowledgements find none
        except Exception:
            pass
    finally:
        broker.stop()
