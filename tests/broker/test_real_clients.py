"""confluent-kafka, kafka-python, aiokafka and kcat each produce to and consume from the broker
process with every compression codec, across several partitions; what comes back must be byte
for byte what went in (keys and headers included). 100 k messages per client in all."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from tests.support import kafka_clients as clients

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CODECS = ["gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
PER_CODEC = 25_000  # x 4 codecs = 100 k messages per client


def _roundtrip(bootstrap: str, produce, consume, codec: str, messages) -> None:  # type: ignore[no-untyped-def]
    topic = f"compat-{codec}-{uuid.uuid4().hex[:8]}"
    clients.create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, messages, codec)
    got = consume(bootstrap, topic, PARTITIONS, len(messages))
    assert len(got) == len(messages)
    assert Counter(got) == Counter(messages)
    # Within a partition the order is the produce order.
    for partition in range(PARTITIONS):
        assert [m for m in got if m[0] == partition] == [m for m in messages if m[0] == partition]


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_roundtrips_every_codec(bootstrap: str, codec: str, idempotent: bool) -> None:
    count = PER_CODEC // 2  # the two idempotence modes share the 100 k
    messages = clients.make_messages(count, PARTITIONS, f"ck-{codec}-{idempotent}")
    _roundtrip(
        bootstrap,
        lambda b, t, m, c: clients.confluent_produce(b, t, m, c, idempotent),
        clients.confluent_consume,
        codec,
        messages,
    )


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrips_every_codec(bootstrap: str, codec: str) -> None:
    messages = clients.make_messages(PER_CODEC, PARTITIONS, f"kp-{codec}")
    _roundtrip(bootstrap, clients.kafka_python_produce, clients.kafka_python_consume, codec, messages)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_roundtrips_every_codec(bootstrap: str, codec: str) -> None:
    messages = clients.make_messages(PER_CODEC, PARTITIONS, f"aio-{codec}")
    _roundtrip(bootstrap, clients.aiokafka_produce, clients.aiokafka_consume, codec, messages)


@pytest.mark.skipif(clients.kcat_binary() is None, reason="kcat not installed (apt-get install kcat)")
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_roundtrips_every_codec(bootstrap: str, codec: str) -> None:
    messages = [
        (p, k, v, (("src", b"kcat"),))
        for p, k, v, _ in clients.make_messages(PER_CODEC, PARTITIONS, f"kcat-{codec}", headers=False)
    ]
    _roundtrip(bootstrap, clients.kcat_produce, clients.kcat_consume, codec, messages)


def test_clients_read_each_others_messages(bootstrap: str) -> None:
    """A topic written by confluent-kafka reads the same through the three other clients."""
    topic = f"cross-{uuid.uuid4().hex[:8]}"
    clients.create_topic(bootstrap, topic, PARTITIONS)
    messages = clients.make_messages(3000, PARTITIONS, "cross")
    clients.confluent_produce(bootstrap, topic, messages, "zstd", True)
    for consume in (clients.kafka_python_consume, clients.aiokafka_consume):
        assert Counter(consume(bootstrap, topic, PARTITIONS, len(messages))) == Counter(messages)


def test_aiokafka_idempotent_producer_roundtrips(bootstrap: str) -> None:
    messages = clients.make_messages(5000, PARTITIONS, "aio-idem")
    _roundtrip(
        bootstrap,
        lambda b, t, m, c: clients.aiokafka_produce(b, t, m, c, idempotent=True),
        clients.aiokafka_consume,
        "lz4",
        messages,
    )
