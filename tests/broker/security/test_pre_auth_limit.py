"""Before a SASL client has authenticated, the broker buffers at most sasl.server.max.receive.size
(512 KiB) of a request (issue 29, item 4; Kafka's fix for CVE-2022-34917): a longer length prefix
closes the connection at once. Authenticated clients and PLAINTEXT listeners keep
socket.request.max.bytes."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from tests.support.secure_brokers import SCRAM_USERS, SecureBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _send_length_prefix(address: str, length: int, wait: float) -> bytes | None:
    """Send a frame header announcing ``length`` bytes and a little of the body; return what the
    broker answers before closing (b"" when it closes), or None if it still waits for the rest
    after ``wait`` seconds."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", length) + b"\x00" * 64)
        sock.settimeout(wait)
        try:
            return sock.recv(1024)
        except TimeoutError:
            return None


def test_an_unauthenticated_frame_over_512_kib_closes_the_connection(secure_broker: SecureBroker) -> None:
    assert _send_length_prefix(secure_broker.sasl_plaintext, 524288 + 1, wait=10) == b""
    # At the limit the broker waits for the body, as it does on a PLAINTEXT listener for far more.
    # A refused frame is closed as soon as its header is read: a second of silence is waiting.
    assert _send_length_prefix(secure_broker.sasl_plaintext, 524288, wait=1) is None
    assert _send_length_prefix(secure_broker.plaintext, 50 << 20, wait=1) is None


def test_an_authenticated_client_still_sends_large_requests(secure_broker: SecureBroker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    config = {
        "bootstrap.servers": secure_broker.sasl_plaintext,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "carol",
        "sasl.password": SCRAM_USERS["carol"],
    }
    topic = f"big-{uuid.uuid4().hex[:8]}"
    value = b"x" * 900_000
    producer = Producer({**config, "compression.type": "none"})
    producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": topic})
    consumer.assign([TopicPartition(topic, 0, 0)])
    message = consumer.poll(15)
    consumer.close()
    assert message is not None and message.error() is None and message.value() == value
