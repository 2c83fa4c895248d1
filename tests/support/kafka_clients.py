"""Produce and consume the same messages with each real Kafka client, for the compatibility tests.

A message is ``(partition, key, value, headers)``; every client produces a list of them and reads
the topic back from offset 0 of each partition, so tests compare byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

Message = tuple[int, bytes, bytes, tuple[tuple[str, bytes], ...]]


def failover_producer(bootstrap: str, overrides: Mapping[str, object] | None = None) -> dict[str, object]:
    """confluent-kafka settings of an idempotent acks=all producer that follows leader changes
    quickly (metadata refreshed every second, short retry back-off): what the cluster tests and
    benches use to write through kills and moves, with ``overrides`` on top."""
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
        "topic.metadata.refresh.interval.ms": 1000,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 200,
    }
    return {**config, **(overrides or {})}


def transactional_producer(bootstrap: str, transactional_id: str) -> dict[str, object]:
    """confluent-kafka settings of a transactional producer that follows leader and coordinator
    changes as quickly as :func:`failover_producer`. A record may wait no longer than the
    transaction (librdkafka refuses a longer ``message.timeout.ms``)."""
    timeouts = {"transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000}
    return failover_producer(bootstrap, {"transactional.id": transactional_id, **timeouts})


def read_values(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    settings: Mapping[str, object] | None = None,
    linger: float = 0.5,
    places: dict[bytes, list[tuple[int, int]]] | None = None,
) -> list[bytes]:
    """Every value of ``topic`` from the start, read by a fresh confluent-kafka consumer that
    commits nothing: until ``expected`` values are in and every partition is read to its end
    (partition EOF; 60 s at most), then ``linger`` seconds more, so a record stored twice is among
    them and one delivered twice shows up beyond the expected count.

    Args:
        settings: consumer settings on top (``client.rack``, ``isolation.level``...).
        places: if given, gets each value's (partition, offset) places, for a failure message
            that says where a duplicate was read.
    """
    import uuid

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    group = f"reader-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **(settings or {}),
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()

    def take(wait: float) -> None:
        for msg in consumer.consume(500, wait):
            if msg.error() is None:
                values.append(msg.value())
                at_end.discard(msg.partition())
                if places is not None:
                    places.setdefault(msg.value(), []).append((msg.partition(), msg.offset()))
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
            else:
                raise AssertionError(msg.error())

    deadline = time.monotonic() + 60
    try:
        while (len(values) < expected or len(at_end) < partitions) and time.monotonic() < deadline:
            take(0.5)
        take(linger)
    finally:
        consumer.close()
    return values


def make_messages(count: int, partitions: int, tag: str, headers: bool = True) -> list[Message]:
    result = []
    for i in range(count):
        value = f"{tag}-{i:07d}-".encode() + b"abcdefghij" * (i % 7)
        hdrs = (("seq", str(i).encode()), ("src", tag.encode())) if headers else ()
        result.append((i % partitions, f"key-{i}".encode(), value, hdrs))
    return result


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs or {})
    admin.create_topics([topic])[name].result(30)


def confluent_produce(
    bootstrap: str, topic: str, messages: Sequence[Message], codec: str, idempotent: bool
) -> None:
    from confluent_kafka import Producer

    errors: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "enable.idempotence": idempotent,
            "acks": "all",
            "linger.ms": 5,
            "batch.num.messages": 5000,
        }
    )
    for partition, key, value, headers in messages:
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    key,
                    partition=partition,
                    headers=list(headers),
                    on_delivery=lambda err, _m: err and errors.append(err),
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def close_within(*consumers: Any, seconds: float = 30) -> None:
    """Close confluent-kafka group consumers together, giving up after ``seconds``.

    Each consumer first leaves its subscription and serves what its queue holds (see
    ``leave_and_drain``), so its close finds no rebalance event waiting; then all are
    closed together. librdkafka's close waits for the group's outstanding requests: a JoinGroup the
    coordinator holds until every member rejoins waits on a member that is not being polled, as one
    closed after the other is not, and blocks in C (confluent-kafka-python issue 1667), where
    pytest-timeout's alarm does not reach it; one such close held a CI worker for minutes. Closed
    together, each member's close serves its own part of the rebalance; a test whose subject is not
    the close closes through this, so a stuck close costs ``seconds`` and a warning, not the run.
    """
    for consumer in consumers:
        leave_and_drain(consumer)
    closers = [threading.Thread(target=c.close, name="consumer-close", daemon=True) for c in consumers]
    for closer in closers:
        closer.start()
    deadline = time.monotonic() + seconds
    for closer in closers:
        closer.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(closer.is_alive() for closer in closers)
    if stuck:
        warnings.warn(
            f"{stuck} consumer close(s) did not return in {seconds:g} s; left to daemon threads", stacklevel=2
        )


def leave_and_drain(consumer: Any, seconds: float = 10) -> None:
    """Unsubscribe ``consumer`` and poll until its queue is empty, while its group still answers:
    what to do before closing a confluent-kafka group consumer (from the thread that polls it).

    A close that finds a rebalance event the application has not served yet (an assignment that
    arrived after the last poll) stops the group first and hands the event over afterwards; the
    binding's default handling of it asks the stopped group for its rebalance protocol, which no
    thread answers any more, and waits forever holding the GIL (librdkafka issue 4041). The whole
    test process froze until faulthandler ended the worker. Unsubscribed, the group takes no new
    assignment, and the events already queued are served here, where the group is alive to answer.
    """
    try:
        consumer.unsubscribe()
        deadline = time.monotonic() + seconds
        while consumer.consume(10_000, 0.2) and time.monotonic() < deadline:
            pass
    except RuntimeError:
        pass  # closed already by the test: nothing is queued for a close to find


def confluent_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[Message]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    result: list[Message] = []
    deadline = time.monotonic() + 60
    try:
        while len(result) < count and time.monotonic() < deadline:
            for m in consumer.consume(10000, 0.5):
                if m.error():
                    raise AssertionError(str(m.error()))
                result.append((m.partition(), m.key(), m.value(), tuple(m.headers() or ())))
    finally:
        consumer.close()
    return result


def kafka_python_produce(bootstrap: str, topic: str, messages: Sequence[Message], codec: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, compression_type=codec, acks="all", linger_ms=5, batch_size=256 * 1024
    )
    futures = [producer.send(topic, value=v, key=k, partition=p, headers=list(h)) for p, k, v, h in messages]
    producer.flush(60)
    for future in futures:
        future.get(30)
    producer.close()


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[Message]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, fetch_max_wait_ms=100
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    result: list[Message] = []
    deadline = time.monotonic() + 60
    while len(result) < count and time.monotonic() < deadline:
        for records in consumer.poll(500, max_records=20000).values():
            result += [(r.partition, r.key, r.value, tuple(r.headers)) for r in records]
    consumer.close()
    return result


def aiokafka_produce(
    bootstrap: str, topic: str, messages: Sequence[Message], codec: str, idempotent: bool = False
) -> None:
    async def run() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=codec,
            acks="all",
            linger_ms=5,
            max_batch_size=256 * 1024,
            enable_idempotence=idempotent,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, v, k, partition=p, headers=list(h)) for p, k, v, h in messages
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[Message]:
    async def run() -> list[Message]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            group_id=None,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
        )
        await consumer.start()
        result: list[Message] = []
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            while len(result) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500, max_records=20000)
                for records in batches.values():
                    result += [(r.partition, r.key, r.value, tuple(r.headers)) for r in records]
        finally:
            await consumer.stop()
        return result

    return asyncio.run(run())


def kcat_binary() -> str | None:
    return shutil.which("kcat") or shutil.which("kafkacat")


def kcat_produce(bootstrap: str, topic: str, messages: Sequence[Message], codec: str) -> None:
    """kcat reads ``key<TAB>value`` lines per partition; headers come from -H, one set for the whole
    run, so every message must carry the same headers."""
    binary = kcat_binary()
    assert binary is not None
    by_partition: dict[int, list[Message]] = {}
    for message in messages:
        by_partition.setdefault(message[0], []).append(message)
    for partition, items in by_partition.items():
        headers = items[0][3]
        assert all(m[3] == headers for m in items), "kcat sends one header set per run"
        args = [
            binary,
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            str(partition),
            "-K",
            "\t",
            "-z",
            codec,
            "-X",
            "acks=all",
            "-X",
            "linger.ms=5",
        ]
        for name, value in headers:
            args += ["-H", f"{name}={value.decode()}"]
        data = b"".join(k + b"\t" + v + b"\n" for _, k, v, _ in items)
        subprocess.run(args, input=data, check=True, timeout=120, capture_output=True)


def kcat_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[Message]:
    binary = kcat_binary()
    assert binary is not None
    out = subprocess.run(
        [
            binary,
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-J",
            "-c",
            str(count),
            "-X",
            "fetch.wait.max.ms=100",
        ],
        check=True,
        timeout=120,
        capture_output=True,
    ).stdout
    result: list[Message] = []
    for line in out.splitlines():
        record = json.loads(line)
        headers = record.get("headers") or []
        pairs = tuple((headers[i], headers[i + 1].encode()) for i in range(0, len(headers), 2))
        result.append((record["partition"], record["key"].encode(), record["payload"].encode(), pairs))
    return result


def share_group_starts_earliest(admin_config: Mapping[str, object], group: str) -> None:
    """Set a share group's ``share.auto.offset.reset`` to ``earliest`` (Kafka's default, ``latest``,
    would skip what a test produced before the group's first fetch)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    admin = AdminClient(dict(admin_config))
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def produce_values(bootstrap: str, topic: str, values: Sequence[str]) -> None:
    """``values`` to partition 0 of ``topic``, in order, acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(60) == 0


def poll_share(consumer: Any, wanted: int, seconds: float = 60, skip_errors: bool = False) -> list[Any]:
    """Poll a ``ShareConsumer`` until ``wanted`` records came or ``seconds`` passed (in explicit
    acknowledgement mode the caller acknowledges each batch before polling again). An error fails
    the test unless ``skip_errors`` (a failover, where the client reports the leader it lost)."""
    got: list[Any] = []
    deadline = time.monotonic() + seconds
    while len(got) < wanted and time.monotonic() < deadline:
        for message in consumer.poll(0.5):
            if message.error() is not None:
                assert skip_errors, message.error()
                continue
            got.append(message)
    return got


def assert_refused(config: Mapping[str, Any], reported: list[str], needle: str = "") -> None:
    """A confluent-kafka client of ``config`` (whose ``error_cb`` appends to ``reported``) is refused:
    it reports an error containing ``needle`` (any error when empty) and a metadata request then
    fails. A refused handshake or login is reported at the first connection, which the client makes
    when it is created, so this waits for the report rather than for a request to time out."""
    import pytest
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from tests.support.waiting import wait_until_sync

    admin = AdminClient(dict(config))
    try:
        wait_until_sync(lambda: admin.poll(0.1) >= 0 and any(needle in text for text in reported), 15)
    except TimeoutError as exc:
        raise AssertionError(f"no error reported containing {needle!r}: {reported}") from exc
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=0.5)


def started_transactional_producer(bootstrap: str, transactional_id: str) -> Any:
    """A confluent-kafka transactional producer, its transactions initialised."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(30)
    return producer


def read_isolated(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int) -> list[bytes]:
    """Every value a consumer at ``isolation`` gets from the start (see ``read_values``): reaching
    the end of every partition (the last stable offset at read_committed) shows nothing more is
    readable, and the half second after it would show extra records."""
    return read_values(bootstrap, topic, partitions, expect, {"isolation.level": isolation})
