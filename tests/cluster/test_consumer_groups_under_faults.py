"""Consumer groups through leader changes, as a user's workload meets them: an idempotent producer
writes steadily while a confluent-kafka group of two members and a kafka-python group consume;
meanwhile a partition leader is killed with SIGKILL, a partition is moved on purpose and the
controller is killed. Every acknowledged record must reach every group, and each group's committed
offsets must reach the end of the log.

What this guards: after a leader change a client validates its position with OffsetForLeaderEpoch
(KIP-320) at the epoch Metadata gave it. A broker that answered as if every partition were at
epoch 0 left librdkafka retrying UNKNOWN_LEADER_EPOCH forever, and the group stopped for good on
every partition that had moved; a fresh consumer (what earlier tests used) never validates.

It runs on the shared WAL only (the WAL `tabletopic cluster up` uses). It ran on the object WAL as
well, a second 40 s scenario; what it guards is in the group and leader-epoch answers, which do not
depend on the WAL kind, and the object WAL's takeover under kill -9 is covered by
test_failover.py's idempotent-producer test, which still runs on each WAL kind.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from functools import partial

from confluent_kafka import Consumer, TopicPartition

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, move_with_cli, new_topic, wait_until
from tests.support.table_producers import SteadyProducer

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 6
RATE = 300  # records per second


class GroupMember:
    """One member of a consumer group consuming in a thread; ``poll`` reads with either client."""

    def __init__(self, name: str, poll: Callable[[], list[bytes]], close: Callable[[], None]) -> None:
        self.seen: set[bytes] = set()
        self.name = name
        # What ended the member's thread, if anything did: a client that raised out of poll()
        # has stopped consuming, which the failure must say rather than a thread warning.
        self.error: BaseException | None = None
        self._poll, self._close = poll, close
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.seen.update(self._poll())
        except Exception as exc:
            self.error = exc
        finally:
            self._close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def confluent_member(bootstrap: str, topic: str, group: str) -> GroupMember:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 500,
            "session.timeout.ms": 10_000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe([topic])

    def poll() -> list[bytes]:
        return [m.value() for m in consumer.consume(200, 0.5) if m.error() is None]

    return GroupMember(f"{group}-confluent", poll, consumer.close)


def kafka_python_member(bootstrap: str, topic: str, group: str) -> GroupMember:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=500,
        metadata_max_age_ms=1000,
        session_timeout_ms=10_000,
    )

    def poll() -> list[bytes]:
        return [r.value for records in consumer.poll(500).values() for r in records]

    return GroupMember(f"{group}-kafka-python", poll, consumer.close)


def _kill(cluster: LocalCluster, node: int) -> None:
    cluster.brokers[node].kill()


def _controller(cluster: LocalCluster) -> int:
    return int(wait_until(lambda: cluster.metadata(next(iter(cluster.running()))).controller_id + 1) - 1)


def _committed_at_end(bootstrap: str, topic: str, group: str) -> bool:
    """Whether the group's committed offsets equal every partition's high watermark."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        ends = [
            probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
        ]
        return [tp.offset for tp in committed] == ends
    finally:
        probe.close()


def test_consumer_groups_catch_up_after_a_leader_kill_a_move_and_a_controller_kill(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "groups", PARTITIONS)
    groups = {"confluent": f"cg-{uuid.uuid4().hex[:6]}", "kafka-python": f"kp-{uuid.uuid4().hex[:6]}"}
    bootstrap = cluster.bootstrap
    members: list[GroupMember] = []
    # Every member is stopped whatever fails: a consumer left running keeps polling brokers the
    # next tests restart, and one destroyed after the cluster stopped can block the run.
    try:
        with SteadyProducer(bootstrap, topic, PARTITIONS, rate=RATE) as writer:
            members += [confluent_member(bootstrap, topic, groups["confluent"]) for _ in range(2)]
            members.append(kafka_python_member(bootstrap, topic, groups["kafka-python"]))
            wait_until(lambda: all(m.seen for m in members), timeout=60)

            # 1. The leader of partition 0 dies; it comes back a few seconds later.
            victim = leaders[0][0]
            _kill(cluster, victim)
            wait_until(lambda: cluster.leaders(topic)[0][0] != victim, timeout=30)
            time.sleep(2)  # the subject: the groups keep consuming while the broker is gone
            cluster.start(victim)

            # 2. A planned move of partition 1.
            source = cluster.leaders(topic)[1][0]
            target = next(n for n in (1, 2, 3) if n != source and n in cluster.running())
            move_with_cli(cluster, topic, 1, target, via=source)
            wait_until(lambda: cluster.leaders(topic)[1][0] == target, timeout=30)

            # 3. The controller dies; it comes back.
            controller = _controller(cluster)
            _kill(cluster, controller)
            wait_until(lambda: _controller(cluster) != controller, timeout=30)
            time.sleep(2)  # the subject: consumption goes on without the old controller
            cluster.start(controller)
            wait_until(
                lambda: all(len(cluster.metadata(n).brokers) == 3 for n in cluster.running()), timeout=30
            )
            epochs = {p: epoch for p, (_, epoch) in cluster.leaders(topic).items()}
        assert not writer.log.errors
        assert epochs[0] > leaders[0][1] and epochs[1] > leaders[1][1]  # both partitions changed leader

        for group in groups.values():
            _wait_for_every_record(
                writer.acked_values(), [m for m in members if m.name.startswith(group)], group
            )
        for group in groups.values():
            wait_until(partial(_committed_at_end, cluster.bootstrap, topic, group), timeout=30, interval=1)
        assert not [(m.name, m.error) for m in members if m.error is not None]
    finally:
        for member in members:
            member.stop()


def _wait_for_every_record(acked: set[bytes], members: list[GroupMember], group: str) -> None:
    def missing() -> set[bytes]:
        return acked - set().union(*(m.seen for m in members))

    try:
        wait_until(lambda: not missing(), timeout=60, interval=0.5)
    except TimeoutError as exc:
        gone = sorted(int(v.split()[1]) for v in missing())
        by_partition = Counter(n % PARTITIONS for n in gone)
        first = {p: next(n for n in gone if n % PARTITIONS == p) for p in sorted(by_partition)}
        died = [f"{m.name} stopped: {m.error!r}" for m in members if m.error is not None]
        raise AssertionError(
            f"group {group} never received {len(gone)} of {len(acked)} records: per partition "
            f"{sorted(by_partition.items())}, the first missing record number of each {first}; {died}"
        ) from exc
