"""SCRAM user names cannot be probed (issue 29, item 9): the server-first message of an unknown
user looks like a real user's, whose credential librdkafka created (64-byte salt, 4096
iterations), and stays the same on every attempt."""

from __future__ import annotations

import base64
import uuid

import pytest

from tests.support.kafka_requests import request
from tests.support.raw_kafka_client import connect, roundtrip
from tests.support.secure_brokers import SecureBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def server_first(broker: SecureBroker, user: str, mechanism: str = "SCRAM-SHA-256") -> tuple[bytes, int]:
    """The salt and iteration count the broker answers a client-first message for ``user`` with."""
    with connect(broker.sasl_plaintext) as sock:
        handshake = roundtrip(sock, request(17, 1, mechanism=mechanism), 1)
        assert handshake.error_code == 0
        first = f"n,,n={user},r={uuid.uuid4().hex}".encode()
        answer = roundtrip(sock, request(36, 2, auth_bytes=first), 2)
    assert answer.error_code == 0
    attributes = dict(part.split("=", 1) for part in answer.auth_bytes.decode().split(","))
    return base64.b64decode(attributes["s"]), int(attributes["i"])


def test_an_unknown_users_salt_looks_like_a_real_users(secure_broker: SecureBroker) -> None:
    real_salt, real_iterations = server_first(secure_broker, "carol")
    made_up_salt, made_up_iterations = server_first(secure_broker, "nobody-" + "x" * 8)
    assert len(made_up_salt) == len(real_salt) == 64
    assert made_up_iterations == real_iterations
    # Stable per name, and per mechanism as a real user's credentials are.
    assert server_first(secure_broker, "nobody-" + "x" * 8)[0] == made_up_salt
    assert server_first(secure_broker, "nobody-" + "x" * 8, "SCRAM-SHA-512")[0] != made_up_salt
    assert server_first(secure_broker, "carol", "SCRAM-SHA-512")[0] != real_salt
