"""Shared WAL takeover with real brokers (the test cluster's default WAL): a broker killed in the
middle of a group commit, a recoverer killed in the middle of its takeover, two recoverers racing
(the first frozen mid-takeover, then woken), and a second broker refused on a WAL directory a live
one writes. The paused-broker case (SIGSTOP through a takeover,
then SIGCONT: it acknowledges nothing) is test_failover's, which runs on this WAL too."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
import uuid
import zlib
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata
from tests.support.cluster import (
    CLUSTER_TEST_MARKS,
    LocalCluster,
    ask_moves,
    placed,
    produce_raw,
    wait_until,
)
from tests.support.kafka_clients import create_topic, failover_producer, read_values

pytestmark = CLUSTER_TEST_MARKS


class Acks:
    """Delivery reports of a producer: what was acknowledged, what failed."""

    def __init__(self) -> None:
        self.acked: list[bytes] = []
        self.failed: list[str] = []

    def __call__(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked.append(msg.value())  # type: ignore[attr-defined]


def _check_once(cluster: LocalCluster, topic: str, partitions: int, acks: Acks) -> None:
    assert not acks.failed, acks.failed[:5]
    where: dict[bytes, list[tuple[int, int]]] = {}
    values = read_values(cluster.bootstrap, topic, partitions, len(acks.acked), places=where)
    duplicates = [v for v, n in Counter(values).items() if n > 1]
    assert not duplicates, [(v, where[v]) for v in duplicates[:5]]
    assert set(acks.acked) <= set(values)


def test_every_acknowledged_record_survives_a_kill_in_the_middle_of_a_group_commit(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    victim = 2
    cluster.brokers[victim].kill()
    # The victim kills itself between writing a group and its fsync, a few hundred groups in.
    cluster.start(victim, env={"TABLETOPIC_CRASH_AT": "wal.before_fsync:400"})
    wait_until(lambda: len(cluster.metadata(1).brokers) == 3, timeout=30)
    topic = f"midcommit-{uuid.uuid4().hex[:8]}"
    partitions = 6
    create_topic(cluster.brokers[1].bootstrap, topic, partitions)
    placed(cluster, topic, partitions)
    acks = Acks()
    producer = Producer(failover_producer(cluster.bootstrap, {"message.timeout.ms": 60_000}))
    process = cluster.brokers[victim].process
    assert process is not None
    sent = 0
    deadline = time.monotonic() + 60
    while (process.poll() is None or sent < 3000) and time.monotonic() < deadline:
        producer.produce(topic, value=f"m-{sent}".encode(), partition=sent % partitions, on_delivery=acks)
        producer.poll(0)
        sent += 1
        time.sleep(0.002)  # a steady rate of about 500 records/s, not a wait for a state
    assert process.poll() == -signal.SIGKILL, "the crash point was not reached"
    cluster.brokers[victim].process = None
    assert producer.flush(90) == 0
    assert len(acks.acked) == sent
    _check_once(cluster, topic, partitions, acks)


def _acknowledged_then_killed(
    cluster: LocalCluster, producer: Producer, topic: str, partitions: int, victim: int
) -> Acks:
    """600 records written and acknowledged, then the victim killed -9; their acknowledgements."""
    acks = Acks()
    for i in range(600):
        producer.produce(topic, value=f"before-{i}".encode(), partition=i % partitions, on_delivery=acks)
    assert producer.flush(60) == 0
    process = cluster.brokers[victim].process
    assert process is not None
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    cluster.brokers[victim].process = None
    return acks


def _victim_and_its_recoverers(cluster: LocalCluster) -> tuple[int, int, int]:
    """Broker 3 as the broker to kill, the broker the controller will name to take its WAL over
    (assign_recoverers' stable choice from its node epoch), and the one it names if that fails."""
    victim, others = 3, [1, 2]
    engine = database.create_engine(cluster.metadata_url)
    try:
        epoch = ClusterMetadata(engine).snapshot().live[victim]
    finally:
        engine.dispose()
    first = others[zlib.crc32(f"{victim}/{epoch}".encode()) % len(others)]
    return victim, first, next(n for n in others if n != first)


def test_a_recoverer_killed_in_the_middle_of_a_takeover_leaves_it_to_another(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    # The broker the controller will name dies right after writing its fence; the controller then
    # names the other one.
    victim, first, second = _victim_and_its_recoverers(cluster)
    # A controlled stop, not a kill: a killed broker's own WAL would wait for a takeover, which the
    # controller may give to this very broker as it restarts, before the victim is even killed.
    cluster.brokers[first].stop()
    cluster.start(first, env={"TABLETOPIC_CRASH_AT": "wal_takeover.after_fence"})
    wait_until(lambda: len(cluster.metadata(second).brokers) == 3, timeout=30)
    topic = f"recoverer-{uuid.uuid4().hex[:8]}"
    partitions = 6
    create_topic(cluster.brokers[second].bootstrap, topic, partitions)
    leaders = placed(cluster, topic, partitions)
    first_process = cluster.brokers[first].process
    assert first_process is not None
    producer = Producer(failover_producer(cluster.bootstrap))
    acks = _acknowledged_then_killed(cluster, producer, topic, partitions, victim)
    assert first_process.wait(60) == -signal.SIGKILL  # reached its crash point mid-takeover
    cluster.brokers[first].process = None

    def writable(p: int) -> bool:
        return produce_raw(cluster, second, topic, p, f"after-{p}".encode()) == 0

    for p, (leader, _) in leaders.items():
        if leader == victim:
            wait_until(functools.partial(writable, p), timeout=60)
    _check_once(cluster, topic, partitions, acks)


def _stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def test_two_recoverers_race_and_every_record_lands_once_when_the_first_wakes_mid_takeover(
    healthy_cluster: LocalCluster,
) -> None:
    """The first recoverer freezes right after fencing the dead broker's WAL (as a long pause
    would); its lease lapses, so the other broker recovers both that WAL and the frozen one's, and
    the partitions move to it. Then the first wakes in the middle of its takeover: it must commit
    nothing over what the second recovered, acknowledge nothing more, and leave the cluster."""
    cluster = healthy_cluster
    victim, first, second = _victim_and_its_recoverers(cluster)
    cluster.brokers[first].stop()  # controlled, as in the test above
    cluster.start(first, env={"TABLETOPIC_PAUSE_AT": "wal_takeover.after_fence"})
    wait_until(lambda: len(cluster.metadata(second).brokers) == 3, timeout=30)
    topic = f"race-{uuid.uuid4().hex[:8]}"
    partitions = 6
    create_topic(cluster.brokers[second].bootstrap, topic, partitions)
    placed(cluster, topic, partitions)
    first_process = cluster.brokers[first].process
    assert first_process is not None
    producer = Producer(failover_producer(cluster.bootstrap, {"message.timeout.ms": 90_000}))
    acks = _acknowledged_then_killed(cluster, producer, topic, partitions, victim)
    wait_until(lambda: _stopped(first_process.pid), timeout=60)  # frozen after its fence

    def writable(p: int) -> bool:
        return produce_raw(cluster, second, topic, p, f"moved-{p}".encode()) == 0

    try:
        for p in range(partitions):  # the victim's and the frozen broker's partitions alike
            wait_until(functools.partial(writable, p), timeout=90)
    finally:
        os.kill(first_process.pid, signal.SIGCONT)
    for i in range(600):
        producer.produce(topic, value=f"after-{i}".encode(), partition=i % partitions, on_delivery=acks)
    assert producer.flush(90) == 0
    first_process.wait(60)  # it found its own WAL taken over and left
    cluster.brokers[first].process = None
    assert len(acks.acked) == 1200
    _check_once(cluster, topic, partitions, acks)


def test_a_broker_refuses_a_shared_wal_directory_a_live_broker_writes(
    healthy_cluster: LocalCluster, tmp_path: Path
) -> None:
    from tabletopic.config import Config, ConfigError
    from tabletopic.platform import Platform

    settings = healthy_cluster.overrides(1)  # broker 1's id and shared WAL path: it runs
    config = Config.load(overrides=[f"{k}={v}" for k, v in settings.items() if v], data_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"s3stream\.wal\.path.*live broker 1"):
        Platform.create(config)


def _half_elsewhere(former: list[int], to: tuple[int, ...]) -> dict[int, int]:
    """Every other one of a killed broker's ``former`` partitions (at least one), each to one of
    the brokers ``to`` in turn: moves that place some of them elsewhere however the counts stand."""
    assert former
    return {p: to[i % len(to)] for i, p in enumerate(former[::2])}


def test_a_broker_started_again_at_once_leaves_none_of_its_former_partitions_unavailable(
    healthy_cluster: LocalCluster,
) -> None:
    """A broker killed -9 and started again at once takes its shared WAL back itself. Its former
    partitions must then take writes within seconds wherever the controller places them. Those it
    placed on other brokers once waited: streams the killed start held with nothing in its WAL
    (here: never written) kept it as their owner, and the brokers to lead them waited for its close
    or a takeover of its WAL, which only the end of the new start brought: minutes of
    unavailability in a fault run. (tests/s3stream/test_shared_wal.py checks the release itself.)"""
    cluster = healthy_cluster
    topic, partitions, victim = f"restarted-{uuid.uuid4().hex[:8]}", 24, 3
    create_topic(cluster.bootstrap, topic, partitions)
    before = placed(cluster, topic, partitions)
    former = [p for p, (leader, _) in before.items() if leader == victim]
    assert former
    process = cluster.brokers[victim].process
    assert process is not None
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    cluster.brokers[victim].process = None
    # Left to the counts, the controller may give every former partition back to the new start
    # (their predicted leader, and it leads the fewest). An operator's moves, asked for while the
    # broker is down, place every other one elsewhere once its WAL is taken back.
    away = _half_elsewhere(former, to=(1, 2))
    ask_moves(cluster, topic, away, via=1)
    cluster.start(victim)

    def replaced() -> dict[int, int] | None:
        """The former partitions' leaders once the controller has placed every one of them again
        (a later leader epoch)."""
        now = placed(cluster, topic, partitions)
        if all(now[p][1] > before[p][1] for p in former):
            return {p: now[p][0] for p in former}
        return None

    moved: dict[int, int] = wait_until(replaced, timeout=30)
    assert {p: moved[p] for p in away} == away, moved
    acks = Acks()
    producer = Producer(failover_producer(cluster.bootstrap, {"message.timeout.ms": 20_000}))
    for p in former:
        producer.produce(topic, value=f"after-{p}".encode(), partition=p, on_delivery=acks)
    assert producer.flush(40) == 0
    assert not acks.failed, (acks.failed[:3], moved)
    assert len(acks.acked) == len(former)


def test_a_broker_started_again_during_another_brokers_takeover_of_its_wal_frees_its_partitions(
    healthy_cluster: LocalCluster,
) -> None:
    """The test above when another broker fences the earlier start's WAL after the new start did
    (the last fencer recovers it): the start cannot take that WAL back, so it may release its
    earlier start's streams only once the other takeover is done. Before, it never did, and its
    former partitions placed on other brokers took no write for as long as it lived.

    The order is made with a long lease and two freezes. The killed incarnation's lease is 20 s, so
    the new start fences first (and freezes right after); the recoverer the controller names once
    that lease ends fences after it (and freezes right after). Then the new start goes on, its
    take-back lost, and then the recoverer (or, if its lease ran out meanwhile, it leaves and the WAL
    goes to another recoverer). Every other former partition is moved to the broker that is never
    frozen, so that some are led elsewhere whatever the counts."""
    cluster = healthy_cluster
    doomed = cluster.brokers[3]
    normal = dict(doomed.overrides)
    # A CI run's new start took over 8 s to reach its fence on a loaded machine: the lease must outlast it.
    doomed.overrides["broker.session.timeout.ms"] = "20000"
    doomed.stop()
    try:
        cluster.start(3)
    finally:
        doomed.overrides = normal  # the next start has the usual lease
    victim, first, second = _victim_and_its_recoverers(cluster)
    cluster.brokers[first].stop()  # controlled, as in the tests above
    cluster.start(first, env={"TABLETOPIC_PAUSE_AT": "wal_takeover.after_fence"})
    wait_until(lambda: len(cluster.metadata(second).brokers) == 3, timeout=30)
    topic, partitions = f"again-{uuid.uuid4().hex[:8]}", 24
    create_topic(cluster.brokers[second].bootstrap, topic, partitions)
    former = [p for p, (leader, _) in placed(cluster, topic, partitions).items() if leader == victim]
    recoverer = cluster.brokers[first].process
    assert recoverer is not None
    # Nothing written: the streams are named by no WAL record, so no recovery clears their owner.
    victim_process = cluster.brokers[victim].process
    assert victim_process is not None
    os.kill(victim_process.pid, signal.SIGKILL)
    victim_process.wait(10)
    cluster.brokers[victim].process = None
    away = _half_elsewhere(former, to=(second,))  # as in the test above
    ask_moves(cluster, topic, away, via=second)
    log_start = cluster.brokers[victim].log_path.stat().st_size
    restart = threading.Thread(
        target=cluster.start,
        args=(victim,),
        kwargs={"env": {"TABLETOPIC_PAUSE_AT": "wal_take_back.after_fence"}},
    )
    restart.start()
    try:
        wait_until(lambda: (p := cluster.brokers[victim].process) is not None and _stopped(p.pid), timeout=60)
        wait_until(lambda: _stopped(recoverer.pid), timeout=60)  # fenced after the new start
    finally:
        started = cluster.brokers[victim].process
        if started is not None:
            os.kill(started.pid, signal.SIGCONT)
        restart.join(90)
        os.kill(recoverer.pid, signal.SIGCONT)
    new_start_log = cluster.brokers[victim].log_path.read_text(errors="replace")[log_start:]
    assert "stay held until their WALs are recovered" in new_start_log, "the take-back was not lost"
    written_at: dict[int, int] = {}

    def writable(p: int) -> bool:
        leader = cluster.leaders(topic, via=second)[p][0]
        if leader in cluster.running() and produce_raw(cluster, leader, topic, p, f"again-{p}".encode()) == 0:
            written_at[p] = leader
        return p in written_at

    for p in former:
        wait_until(functools.partial(writable, p), timeout=90)
    assert {p: written_at[p] for p in away} == away, written_at
    # Leave the cluster whole or the frozen broker gone (the fixture then starts it again).
    wait_until(lambda: recoverer.poll() is not None or len(cluster.metadata(second).brokers) == 3, timeout=60)
