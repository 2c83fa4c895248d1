"""The object WAL, where the batch object's commit in PostgreSQL is the acknowledgement.

- It acknowledges after one upload, not after a window: a broker in cluster mode with
  ``s3stream.wal.object.batch.ms=1000`` (pacing batch objects at most one a second) still
  acknowledges a produce arriving after a quiet second as soon as its batch object is stored and
  committed (SeaweedFS and PostgreSQL on loopback), well under the second a window would have made
  it wait.
- It loses nothing acknowledged when PostgreSQL restarts under an idempotent producer: every commit
  under way fails, the producer retries, and every record it was told is delivered is read back.

Real client: confluent-kafka, idempotent, acks=all.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.support.cluster import LocalCluster, placed
from tests.support.cluster_fixtures import one_broker
from tests.support.kafka_clients import create_topic, failover_producer, read_values
from tests.support.postgres import PostgresServer
from tests.support.seaweedfs import SeaweedFS, s3_settings_of
from tests.support.table_node import DeliveryLog

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.s3]


@pytest.fixture
def paced_broker(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer, seaweedfs: SeaweedFS
) -> Iterator[LocalCluster]:
    url = postgres_server.create_database(f"paced_{uuid.uuid4().hex[:8]}")
    settings = {"s3stream.wal.object.batch.ms": "1000"}
    cluster = one_broker(tmp_path_factory.mktemp("paced"), url, s3_settings_of(seaweedfs, "paced"), settings)
    try:
        yield cluster
    finally:
        cluster.stop_all()


def test_a_produce_is_acknowledged_after_one_upload_not_after_the_batch_window(
    paced_broker: LocalCluster,
) -> None:
    bootstrap = paced_broker.brokers[1].bootstrap
    topic = f"paced-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    placed(paced_broker, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    producer.produce(topic, value=b"warm-up")  # connection, producer id, leader known
    assert producer.flush(30) == 0
    latencies: list[float] = []
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            latencies.append(msg.latency() or 0.0)

    for i in range(3):
        time.sleep(1.2)  # a quiet second: the pacing allows the next batch object at once
        producer.produce(topic, value=b"alone-%d" % i, on_delivery=delivered)
        assert producer.flush(30) == 0
    assert not errors
    assert len(latencies) == 3
    # A window of batch.ms would hold each for a whole second; one upload on loopback takes a few
    # tens of milliseconds (the bound is generous for a loaded machine).
    assert min(latencies) < 0.5, latencies


PARTITIONS, RESTARTS = 12, 8


def test_no_acknowledged_record_is_lost_when_postgresql_restarts(
    tmp_path: Path, own_postgres: PostgresServer, seaweedfs: SeaweedFS
) -> None:
    """One-record batches on twelve partitions while PostgreSQL restarts eight times: the commits
    under way fail (KAFKA_STORAGE_ERROR), librdkafka retries and bumps its epoch when later batches
    come back out of sequence, and the broker must take each retry before anything the producer sent
    after it. Every record the producer reported delivered, with or without an offset, is read
    back, and nothing twice.

    The loss this guards against needs a restart to end between two in-flight batches of a
    partition, so without the fix one run in two lost a record or two; the unit tests in
    ``tests/broker/test_producers.py`` pin the rule itself."""
    url = own_postgres.create_database("restarts")
    cluster = one_broker(tmp_path / "cluster", url, s3_settings_of(seaweedfs, "restarts"))
    try:
        bootstrap = cluster.brokers[1].bootstrap
        topic = f"restarts-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, PARTITIONS)
        placed(cluster, topic, PARTITIONS)
        delivered = DeliveryLog()
        producer = Producer(failover_producer(bootstrap, {"linger.ms": 0, "log_level": 2}))
        stop = threading.Event()

        def write() -> None:  # 300 records a second: 25 a partition, each its own batch
            sent, began = 0, time.monotonic()
            while not stop.is_set():
                while sent < (time.monotonic() - began) * 300:
                    value = f"{topic}-{sent}".encode()
                    producer.produce(
                        topic, value, partition=sent % PARTITIONS, on_delivery=delivered.callback(value)
                    )
                    sent += 1
                producer.poll(0.005)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        for _ in range(RESTARTS):
            # A second of writing between restarts (the subject of the test), so each restart
            # catches commits in flight on every partition.
            time.sleep(1.0)
            own_postgres.restart()
        time.sleep(1.0)  # and a second after the last, so its batches in flight are retried
        stop.set()
        writer.join(10)
        assert producer.flush(120) == 0
        assert not delivered.errors, delivered.errors[:5]
        acknowledged = [delivered.values[p] for p in delivered.acked] + [v for _, v in delivered.unplaced]
        read = read_values(bootstrap, topic, PARTITIONS, len(acknowledged))
        missing = set(acknowledged) - set(read)
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
        assert len(read) == len(set(read)), "a record was read twice"
    finally:
        cluster.stop_all()
