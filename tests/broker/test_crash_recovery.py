"""SIGKILL the broker process in the middle of an acks=all produce run: after a restart every
acknowledged message is there exactly once, and committed group offsets are intact."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import kafka_clients as clients
from tests.support.broker_process import BrokerProcess
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3


@pytest.fixture
def crash_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "crash", {"admin.listener": ""}).start()
    yield process
    process.stop()


def test_acknowledged_messages_survive_sigkill_exactly_once(crash_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic = f"crash-{uuid.uuid4().hex[:8]}"
    clients.create_topic(crash_broker.bootstrap, topic, PARTITIONS)
    acknowledged: list[bytes] = []
    failed: list[bytes] = []
    lock = threading.Lock()
    producer = Producer(
        {
            "bootstrap.servers": crash_broker.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 60000,
            "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 50,
        }
    )

    def on_delivery(err: object, message: object) -> None:
        with lock:
            (failed if err else acknowledged).append(message.value())  # type: ignore[attr-defined]

    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(
                    topic, f"m-{i:08d}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery
                )
                i += 1
            except BufferError:
                pass
            producer.poll(0.0005 if i % 100 else 0.002)
        sent[0] = i

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        wait_until_sync(lambda: len(acknowledged) >= 5000, timeout=20, interval=0.05)
    except TimeoutError as exc:
        raise AssertionError(crash_broker.log_tail()) from exc
    crash_broker.kill()
    acked_at_kill = len(acknowledged)
    time.sleep(0.5)  # the subject: the broker stays down a moment while the producer keeps producing
    crash_broker.start()
    # The producer keeps retrying through the restart and gets through to the new process.
    wait_until_sync(lambda: len(acknowledged) > acked_at_kill + 500, timeout=60, interval=0.05)
    stop.set()
    thread.join(30)
    assert producer.flush(60) == 0
    assert not failed, failed[:3]
    assert len(acknowledged) == sent[0] > acked_at_kill

    got = clients.confluent_consume(crash_broker.bootstrap, topic, PARTITIONS, sent[0])
    values = Counter(value for _, _, value, _ in got)
    duplicates = [v for v, n in values.items() if n > 1]
    assert not duplicates, duplicates[:5]
    missing = set(acknowledged) - set(values)
    assert not missing, sorted(missing)[:5]
    # Per partition, the order is the produce order.
    for partition in range(PARTITIONS):
        sequence = [int(v[2:]) for p, _, v, _ in got if p == partition]
        assert sequence == sorted(sequence)


def test_topics_configs_and_committed_group_offsets_survive_sigkill(crash_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    topic = f"offsets-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": crash_broker.bootstrap})
    new_topic = NewTopic(
        topic, num_partitions=PARTITIONS, replication_factor=1, config={"retention.ms": "86400000"}
    )
    admin.create_topics([new_topic])[topic].result(30)
    before = admin.list_topics(topic, timeout=10).topics[topic]
    clients.confluent_produce(
        crash_broker.bootstrap, topic, clients.make_messages(300, PARTITIONS, "o"), "none", True
    )
    config = {
        "bootstrap.servers": crash_broker.bootstrap,
        "group.id": f"g-{topic}",
        "enable.auto.commit": False,
    }
    consumer = Consumer(config)
    wanted = [TopicPartition(topic, p, 10 * (p + 1)) for p in range(PARTITIONS)]
    consumer.commit(offsets=wanted, asynchronous=False)
    consumer.close()
    crash_broker.kill()
    crash_broker.start()
    consumer = Consumer(config)
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    assert [c.offset for c in committed] == [10, 20, 30]
    admin = AdminClient({"bootstrap.servers": crash_broker.bootstrap})
    metadata = admin.list_topics(topic, timeout=10).topics[topic]
    assert len(metadata.partitions) == len(before.partitions) == PARTITIONS
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "86400000"
    assert clients.confluent_consume(crash_broker.bootstrap, topic, PARTITIONS, 300)
