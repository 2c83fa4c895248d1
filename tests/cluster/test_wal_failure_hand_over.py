"""A broker whose shared WAL fails a write (its disk full, for real) under a user's workload: it hands
its partitions to the other brokers and ends with EXIT_REJOIN, as Kafka moves leaders off a broker
whose log directory failed, instead of keeping partitions it can acknowledge nothing more on. The
producer sees no error, the consumer group reads every acknowledged record and commits the end,
nothing is stored twice, and the broker started again (space freed) rejoins.

The disk: a tmpfs of one WAL segment and a little more, mounted as the broker's ``s3stream.wal.path``
(segments of 1 MiB). The broker starts on it; the segment after its first cannot be allocated, so
the first roll (its first upload) fails with ``No space left on device``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from confluent_kafka import Consumer, TopicPartition

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata
from tabletopic.config import EXIT_REJOIN
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, ask_moves, new_topic, wait_until
from tests.support.group_member import GroupMember, committed_offsets, read_by
from tests.support.kafka_clients import read_values
from tests.support.small_disk import mount_tmpfs, unmount
from tests.support.table_producers import SteadyProducer

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 6
VICTIM = 2
SEGMENT = 1 << 20
# Room for the first segment (written as zeros at the start), the fence files and no second one.
DISK = "1088k"


@dataclass
class WalDisk:
    """The victim's full WAL disk, and what puts the victim back on the cluster's shared WAL."""

    path: Path
    cluster_settings: dict[str, str]

    def restore(self, broker: BrokerProcess) -> None:
        broker.overrides.clear()
        broker.overrides.update(self.cluster_settings)


@pytest.fixture
def full_wal_disk(tmp_path: Path, healthy_cluster: LocalCluster) -> Iterator[WalDisk]:
    """A tmpfs for the victim's shared WAL; unmounted once no WAL on it is left to recover."""
    path = tmp_path / "wal-disk"
    path.mkdir()
    refused = mount_tmpfs(path, DISK)
    if refused is not None:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root and CAP_SYS_ADMIN): {refused}")
    broker = healthy_cluster.brokers[VICTIM]
    disk = WalDisk(path, dict(broker.overrides))
    try:
        yield disk
    finally:
        if broker.overrides != disk.cluster_settings:  # the test stopped half way
            broker.kill()
            mount_tmpfs(path, "64m", remount=True)  # room for its recoverer's fence
            disk.restore(broker)
        if broker.process is None:
            healthy_cluster.start(VICTIM)
        engine = database.create_engine(healthy_cluster.metadata_url)
        try:
            wait_until(lambda: not _wals_on(engine, path), timeout=60)
            unmount(path)
        except TimeoutError:
            pass  # left mounted: a recoverer that found the directory gone would retry for ever
        finally:
            engine.dispose()


def _wals_on(engine: sa.Engine, disk: Path) -> list[str]:
    """The shared WALs still to recover that lie on ``disk``."""
    return [w.wal for w in ClusterMetadata(engine).snapshot().wals if w.wal.startswith(str(disk))]


def test_a_broker_whose_wal_disk_fills_hands_its_partitions_over_and_nothing_is_lost(
    healthy_cluster: LocalCluster, full_wal_disk: WalDisk
) -> None:
    cluster = healthy_cluster
    topic, _ = new_topic(cluster, "walfull", PARTITIONS)
    group = f"walfull-{uuid.uuid4().hex[:6]}"
    members = [GroupMember(cluster.bootstrap, topic, group) for _ in range(2)]
    for member in members:
        member.start()
    victim = cluster.brokers[VICTIM]
    try:
        with SteadyProducer(cluster.bootstrap, topic, PARTITIONS, rate=200) as writer:
            wait_until(lambda: len(writer.log.acked) > 200, timeout=30)
            victim.stop()  # SIGTERM: its partitions move to the others meanwhile
            victim.overrides["s3stream.wal.path"] = str(full_wal_disk.path)
            victim.overrides["s3stream.wal.segment.bytes"] = str(SEGMENT)
            cluster.start(VICTIM)
            others = [n for n in (1, 2, 3) if n != VICTIM]
            ask_moves(cluster, topic, {0: VICTIM, 1: VICTIM}, via=others[0])
            process = victim.process
            assert process is not None
            assert process.wait(timeout=90) == EXIT_REJOIN, victim.log_tail()
            victim.process = None
            log = victim.log_tail(200_000)
            assert "No space left on device" in log
            assert "hands its partitions to the other brokers" in log
            assert "controlled shutdown: partitions moved" in log
            # The operator frees space (where its WAL's recoverer writes its fence) and the
            # supervisor starts the broker again, here on the cluster's shared WAL directory.
            assert mount_tmpfs(full_wal_disk.path, "64m", remount=True) is None
            full_wal_disk.restore(victim)
            cluster.start(VICTIM)
            wait_until(lambda: all(len(cluster.metadata(n).brokers) == 3 for n in (1, 2, 3)), timeout=30)
            acked_before_end = len(writer.log.acked)
            wait_until(lambda: len(writer.log.acked) > acked_before_end + 200, timeout=30)
        assert not writer.log.errors, writer.log.errors[:5]
        acked = writer.acked_values()
        stored = read_values(cluster.bootstrap, topic, PARTITIONS, len(acked))
        assert len(stored) == len(set(stored)), "a record stored twice"
        assert acked <= set(stored)
        wait_until(lambda: acked <= set(read_by(members)), timeout=60, interval=0.5)
        ends = _ends(cluster.bootstrap, topic)
        assert sum(ends.values()) == len(stored)
        wait_until(
            lambda: committed_offsets(cluster.bootstrap, group, topic, range(PARTITIONS)) == ends,
            timeout=30,
            interval=1,
        )
    finally:
        for member in members:
            member.stop()


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:6]}"})
    try:
        return {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
        }
    finally:
        probe.close()
