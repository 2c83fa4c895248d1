"""Reassignment and scaling: a partition moves under load with no data copied, a new broker joins
and receives partitions, and SIGTERM drains a broker's partitions before it exits."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from typing import Any

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata
from tests.support.cluster import (
    CLUSTER_TEST_MARKS,
    LocalCluster,
    move_with_cli,
    new_topic,
    one_request,
    produce_raw,
    wait_until,
)
from tests.support.kafka_clients import produce_values, read_values
from tests.support.kafka_requests import request
from tests.support.ports import free_port
from tests.support.table_producers import SteadyProducer

pytestmark = CLUSTER_TEST_MARKS


def _led_by(cluster: LocalCluster, node: int) -> int:
    answer = cluster.metadata(next(n for n in cluster.running() if n != node))
    return sum(p.leader_id == node for t in answer.topics for p in t.partitions)


def _check_exactly_once(cluster: LocalCluster, load: SteadyProducer, partitions: int) -> None:
    assert not load.log.errors, load.log.errors[:5]
    # librdkafka acknowledges a batch without an offset when a later batch of the partition succeeded
    # after its own request failed uncertain (a connection the old leader closed): still delivered.
    assert len(load.log.acked) + len(load.log.unplaced) == load.sent
    values = Counter(read_values(cluster.bootstrap, load.topic, partitions, load.sent))
    assert load.acked_values() <= set(values)
    assert max(values.values()) == 1


def _wait_more_acks(load: SteadyProducer, more: int = 200) -> None:
    """Let the steady load go on until ``more`` further records are acknowledged."""
    before = len(load.log.acked)
    wait_until(lambda: len(load.log.acked) >= before + more, timeout=60, interval=0.02)


def test_partitions_move_under_load_with_the_cli(healthy_cluster: LocalCluster) -> None:
    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "move", 6)
    source, epoch = leaders[0]
    target = next(n for n in (1, 2, 3) if n != source)
    with SteadyProducer(cluster.bootstrap, topic, 6) as load:
        _wait_more_acks(load)
        started = time.monotonic()
        move_with_cli(cluster, topic, 0, target, via=source)
        wait_until(lambda: produce_raw(cluster, target, topic, 0, b"moved") == 0, timeout=10, interval=0.02)
        print(f"moved {topic}-0 from {source} to {target} in {time.monotonic() - started:.2f} s under load")
        _wait_more_acks(load)
    assert cluster.leaders(topic)[0] == (target, cluster.leaders(topic)[0][1])
    assert cluster.leaders(topic)[0][1] > epoch
    assert produce_raw(cluster, source, topic, 0, b"stale") != 0
    _check_exactly_once(cluster, load, 6)


def test_a_new_broker_receives_partitions_sigterm_drains_it_and_unregister_removes_it(
    healthy_cluster: LocalCluster,
) -> None:
    """Scaling out and back in, as an operator does it: broker 4 joins under load and receives
    partitions, SIGTERM drains it, and once it is gone `cluster unregister` (or Kafka's
    UnregisterBroker) removes it from every listing, refusing it while it was alive."""
    cluster = healthy_cluster
    topic, _ = new_topic(cluster, "scale", 12)
    port = free_port()  # its admin API, advertised under another name, as behind a port mapping
    advertised = {
        "admin.listener": f"http://127.0.0.1:{port}",
        "admin.advertised.uri": f"http://localhost:{port}",
    }
    with SteadyProducer(cluster.bootstrap, topic, 12) as load:
        cluster.start(4, **advertised)
        try:
            # The balancer evens out partition counts over every topic of the shared cluster.
            wait_until(lambda: _led_by(cluster, 4) >= 2, timeout=30)
            assert _admin_urls(cluster)[4] == f"http://localhost:{port}"  # where peers and consoles go
            refused = _unregister_with_cli(cluster, 4)
            assert refused.returncode == 1 and "broker 4 is alive: stop it first" in refused.stderr
            _wait_more_acks(load)
            cluster.brokers[4].stop()  # SIGTERM: controlled shutdown
            assert _led_by(cluster, 4) == 0
            _wait_more_acks(load)
        finally:
            cluster.brokers[4].kill()
            del cluster.brokers[4]
    _check_exactly_once(cluster, load, 12)
    assert 4 in _brokers_listed(_status(cluster))  # stopped, and listed so until unregistered
    # A stopped broker's shared WAL is taken over first: refused (saying so) until then.
    wait_until(lambda: _unregister_broker(cluster, 4, via=2)[0] == 0, timeout=30)
    assert 4 not in _brokers_listed(status := _status(cluster))
    assert "unregistered: broker 4 unregistered by UnregisterBroker from User:ANONYMOUS" in status
    assert _unregister_broker(cluster, 4, via=1) == (102, "broker 4 is not registered in this cluster")
    gone = _unregister_with_cli(cluster, 4)
    assert gone.returncode == 1 and "broker 4 is not registered in this cluster" in gone.stderr


def _admin_urls(cluster: LocalCluster) -> dict[int, str]:
    engine = database.create_engine(cluster.metadata_url)
    try:
        return {int(n): url for n, url in ClusterMetadata(engine).admin_urls().items()}
    finally:
        engine.dispose()


def _unregister_broker(cluster: LocalCluster, node: int, via: int) -> tuple[int, str | None]:
    """UnregisterBroker (64), what `kafka-cluster unregister --id` sends: error code and message."""
    answer = one_request(cluster, via, request(64, 0, broker_id=node))
    return int(answer.error_code.value), answer.error_message


def _unregister_with_cli(cluster: LocalCluster, node: int) -> subprocess.CompletedProcess[str]:
    command = ["cluster", "unregister", str(node), "--metadata-url", cluster.metadata_url]
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", *command], capture_output=True, text=True, timeout=60
    )


def _brokers_listed(status: str) -> set[int]:
    """The NODE column of `cluster status`'s broker table."""
    lines = status.split("\n\n")[1].splitlines()
    assert lines[0].startswith("NODE\t"), status
    return {int(line.split("\t")[0]) for line in lines[1:]}


def _status(cluster: LocalCluster) -> str:
    command = ["cluster", "status", "--metadata-url", cluster.metadata_url]
    done = subprocess.run(
        [sys.executable, "-m", "tabletopic", *command], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_kafka_python_consumer_follows_its_partition_to_a_broker_it_has_never_seen(
    healthy_cluster: LocalCluster,
) -> None:
    """A Fetch refused NOT_LEADER_OR_FOLLOWER may name the new leader (KIP-951). kafka-python takes
    that name but not the address beside it, and a leader absent from its metadata made poll()
    raise UnknownBrokerIdError: here the leader is a broker that joined after the consumer read
    its metadata."""
    from kafka import KafkaConsumer, TopicPartition

    cluster = healthy_cluster
    topic, _ = new_topic(cluster, "unseen", 1)
    produce_values(cluster.bootstrap, topic, [f"before {n}" for n in range(10)])
    # No periodic metadata refresh: the consumer learns of the new broker only when told.
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap.split(","), metadata_max_age_ms=600_000, fetch_max_wait_ms=100
    )
    seen: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        wait_until(lambda: len(_read(consumer, seen)) >= 10, timeout=30)
        # A position with no leader epoch (as a group's committed offset may be) is fetched from
        # the leader named without asking that leader first (no OffsetForLeaderEpoch).
        consumer.seek(TopicPartition(topic, 0), 10)
        cluster.start(4)
        try:
            move_with_cli(cluster, topic, 0, 4, via=1)
            wait_until(lambda: produce_raw(cluster, 4, topic, 0, b"after") == 0, timeout=30, interval=0.1)
            wait_until(lambda: b"after" in _read(consumer, seen), timeout=30)
        finally:
            cluster.brokers[4].stop()  # SIGTERM: its partitions are handed back first
            del cluster.brokers[4]
    finally:
        consumer.close()
    assert seen == [f"before {n}".encode() for n in range(10)] + [b"after"]


def _read(consumer: Any, seen: list[bytes]) -> list[bytes]:
    """Poll once; ``seen`` with what came, in order."""
    seen += [r.value for records in consumer.poll(200).values() for r in records]
    return seen
