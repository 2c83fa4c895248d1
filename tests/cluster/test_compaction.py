"""Compaction in a cluster: a compacted partition is cleaned by its leader, and the rewrite of
objects that also hold another broker's partition copies that partition's data (a broker that
later loads it from the metadata database reads every record); the controller merges every
broker's small objects without losing a record."""

from __future__ import annotations

import time
import uuid

import sqlalchemy as sa
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tabletopic.broker import wire_client
from tabletopic.broker.topics import partitions_table
from tabletopic.s3stream.db import ObjectState, objects_table, ranges_table
from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, new_topic, placed, wait_until

pytestmark = CLUSTER_TEST_MARKS

KEYS, ROUNDS = 5, 20


def _move(cluster: LocalCluster, topic: str, node: int, partitions: int = 1) -> None:
    def asked() -> bool:
        answer = wire_client.call(
            cluster.bootstrap.split(",")[0],
            45,
            0,
            timeout=30_000,  # the request's timeout (ms), also the socket's (s)
            topics=[{"name": topic, "partitions": [{"partition_index": 0, "replicas": [node]}]}],
        )
        return bool(answer.responses[0].partitions[0].error_code.value == 0)

    wait_until(asked, timeout=30, interval=0.5)  # refused until every broker knows the partition
    wait_until(lambda: placed(cluster, topic, partitions)[0][0] == node)


def _read(cluster: LocalCluster, topic: str, partition: int = 0) -> list[tuple[bytes | None, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    records: list[tuple[bytes | None, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is None:
                records.append((msg.key(), msg.value()))
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                break
            else:
                raise AssertionError(msg.error())
    finally:
        consumer.close()
    return records


def test_a_compacted_partition_is_cleaned_by_its_leader_without_losing_others_data(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    tag = uuid.uuid4().hex[:8]
    compacted, plain = f"compacted-{tag}", f"neighbour-{tag}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    configs = {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.01",
        "max.compaction.lag.ms": "1000",
    }
    futures = admin.create_topics([NewTopic(compacted, 1, 1, config=configs), NewTopic(plain, 1, 1)])
    for future in futures.values():
        future.result(30)
    leader = placed(cluster, compacted, 1)[0][0]
    if placed(cluster, plain, 1)[0][0] != leader:
        _move(cluster, plain, leader)  # both written by one broker: into the same objects
    # A round of keys is one batch (a batch keeps at least one record when compacted).
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 100, "acks": "all"})

    def write(topic: str, values: list[tuple[bytes | None, bytes]]) -> None:
        for key, value in values:
            producer.produce(topic, value, key, partition=0)

    for round_ in range(ROUNDS):  # both partitions' batches in the same objects
        write(compacted, [(f"k{k}".encode(), f"v{round_}".encode()) for k in range(KEYS)])
        write(plain, [(None, f"p{round_}".encode())])
        assert producer.flush(30) == 0
    elsewhere = next(n for n in (1, 2, 3) if n != leader)
    _move(cluster, plain, elsewhere)  # its data stays in objects the leader rewrites
    for round_ in range(ROUNDS):  # dirty again: cleaned by passes after the move
        write(compacted, [(f"k{k}".encode(), f"w{round_}".encode()) for k in range(KEYS)])
        assert producer.flush(30) == 0

    def cleaned() -> list[tuple[bytes | None, bytes]] | None:
        records = _read(cluster, compacted)
        late = [v for _, v in records if v.startswith(b"w")]
        return records if len(late) < KEYS * ROUNDS // 2 else None

    records = wait_until(cleaned, timeout=60, interval=1.0)
    latest = {key: value for key, value in records}
    assert latest == {f"k{k}".encode(): f"w{ROUNDS - 1}".encode() for k in range(KEYS)}
    third = next(n for n in (1, 2, 3) if n not in (leader, elsewhere))
    _move(cluster, plain, third)  # loads the partition's ranges from the database afresh
    assert sorted(v for _, v in _read(cluster, plain)) == sorted(f"p{r}".encode() for r in range(ROUNDS))


def _objects_holding(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    """How many committed objects hold ``topic``'s data, and the most of its partitions one object
    holds. Only this test's objects count: other tests' writes to the shared cluster (and merges of
    them) do not move the figures."""
    engine = sa.create_engine(cluster.metadata_url)
    try:
        with engine.connect() as conn:
            streams = sa.select(partitions_table.c.stream_id).where(partitions_table.c.topic == topic)
            per_object = (
                sa.select(sa.func.count(sa.distinct(ranges_table.c.stream_id)).label("streams"))
                .select_from(ranges_table.join(objects_table))
                .where(ranges_table.c.stream_id.in_(streams), objects_table.c.state == ObjectState.COMMITTED)
                .group_by(ranges_table.c.object_id)
                .subquery()
            )
            query = sa.select(sa.func.count(), sa.func.coalesce(sa.func.max(per_object.c.streams), 0))
            objects, widest = conn.execute(query).one()
            return int(objects), int(widest)
    finally:
        engine.dispose()


def test_the_controller_merges_every_brokers_small_objects_losing_nothing(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "merged", 3)
    assert len({node for node, _ in leaders.values()}) > 1
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all"})
    for round_ in range(ROUNDS):  # small objects: uploads of a flush or a few
        for p in range(3):
            producer.produce(topic, f"m{round_}-{p}".encode(), partition=p)
        assert producer.flush(30) == 0

    # Each leader uploads objects holding only its own partitions; an object holding all three
    # partitions (led by more than one broker) can only be the controller's merge.
    def merged() -> bool:
        objects, widest = _objects_holding(cluster, topic)
        return objects <= ROUNDS // 4 and widest == 3

    wait_until(merged, timeout=90, interval=1.0)
    _move(cluster, topic, next(n for n in (1, 2, 3) if n != leaders[0][0]), 3)  # ranges read afresh
    for p in range(3):
        values = sorted(v for _, v in _read(cluster, topic, p))
        assert values == sorted(f"m{r}-{p}".encode() for r in range(ROUNDS)), p
