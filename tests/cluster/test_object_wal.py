"""The object WAL acknowledges after one upload, not after a window: a broker in cluster mode with
``s3stream.wal.object.batch.ms=1000`` (pacing batch objects at most one a second) still
acknowledges a produce arriving after a quiet second as soon as its batch object is stored and
committed (SeaweedFS and PostgreSQL on loopback), well under the second a window would have made it
wait. Real client: confluent-kafka, idempotent, acks=all."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.support.cluster import LocalCluster, placed, wait_until
from tests.support.kafka_clients import create_topic
from tests.support.postgres import PostgresServer
from tests.support.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedFS

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.s3]


@pytest.fixture
def paced_broker(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer, seaweedfs: SeaweedFS
) -> Iterator[LocalCluster]:
    s3 = {
        "s3.endpoint": seaweedfs.endpoint,
        "s3.bucket": seaweedfs.bucket,
        "s3.region": "us-east-1",
        "s3.access.key": ACCESS_KEY,
        "s3.secret.key": SECRET_KEY,
        "s3.path.style": "true",
        "s3.prefix": f"paced-{uuid.uuid4().hex[:8]}/",
    }
    url = postgres_server.create_database(f"paced_{uuid.uuid4().hex[:8]}")
    cluster = LocalCluster(
        tmp_path_factory.mktemp("paced"), url, s3, {"s3stream.wal.object.batch.ms": "1000"}
    )
    try:
        cluster.start(1)
        wait_until(lambda: len(cluster.metadata(1).brokers) == 1, timeout=30)
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
