"""SASL/PLAIN: the sans-IO state machine, and real clients on the SASL_PLAINTEXT listener."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.security.listener import parse_users
from tabletopic.broker.security.sasl import SaslServer, SaslState, check_plain_password
from tabletopic.config import ConfigError
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_clients import assert_refused
from tests.support.raw_kafka_client import connect, roundtrip


def SaslPlainServer(users: dict[str, str]) -> SaslServer:
    return SaslServer(["PLAIN"], check_plain_password(users), lambda user, mechanism: None)


def test_plain_handshake_then_valid_token_authenticates() -> None:
    sasl = SaslPlainServer({"alice": "secret"})
    assert not sasl.allows(3)
    assert sasl.handshake("PLAIN", 1) is ErrorCode.none
    result = sasl.authenticate(b"\0alice\0secret")
    assert result.error_code is ErrorCode.none
    assert sasl.principal == "User:alice"
    assert sasl.allows(3)


@pytest.mark.parametrize(
    "token", [b"\0alice\0wrong", b"\0mallory\0secret", b"garbage", b"bob\0alice\0secret"]
)
def test_bad_tokens_fail(token: bytes) -> None:
    sasl = SaslPlainServer({"alice": "secret"})
    sasl.handshake("PLAIN", 1)
    assert sasl.authenticate(token).error_code is ErrorCode.sasl_authentication_failed
    assert sasl.state is SaslState.FAILED


def test_unknown_mechanism_and_out_of_order_steps() -> None:
    sasl = SaslPlainServer({})
    assert sasl.handshake("SCRAM-SHA-256", 1) is ErrorCode.unsupported_sasl_mechanism
    assert SaslPlainServer({}).authenticate(b"\0a\0b").error_code is ErrorCode.illegal_sasl_state


def test_v0_handshake_expects_a_raw_token() -> None:
    sasl = SaslPlainServer({"a": "b"})
    sasl.handshake("PLAIN", 0)
    assert sasl.expects_raw_token


def test_user_list_parsing() -> None:
    assert parse_users(["alice:s:x", "bob:"]) == {"alice": "s:x", "bob": ""}
    with pytest.raises(ConfigError, match=r"sasl\.plain\.users"):
        parse_users(["nobody"])


def _sasl_plain(user: str) -> dict[str, str]:
    """Client settings for `user` (password `<user>-secret`, as the broker process lists them)
    over SASL/PLAIN without TLS."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def _produce_one(bootstrap: str, auth: dict[str, str], topic: str, value: bytes) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, **auth})
    producer.produce(topic, value)
    assert producer.flush(30) == 0


@pytest.mark.integration
def test_confluent_kafka_authenticates_on_the_sasl_listener(broker_process: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = f"127.0.0.1:{broker_process.sasl_port}"
    auth = _sasl_plain("alice")
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    _produce_one(bootstrap, auth, topic, b"secret message")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sasl", **auth})
    consumer.assign([TopicPartition(topic, 0, 0)])
    message = consumer.poll(15)
    consumer.close()
    assert message is not None and message.value() == b"secret message"


@pytest.mark.integration
def test_consumer_group_on_the_sasl_listener_finds_its_coordinator_there(
    broker_process: BrokerProcess,
) -> None:
    from confluent_kafka import Consumer

    bootstrap = f"127.0.0.1:{broker_process.sasl_port}"
    auth = _sasl_plain("bob")
    topic = f"sasl-group-{uuid.uuid4().hex[:8]}"
    _produce_one(bootstrap, auth, topic, b"for the group")
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", **auth}
    )
    consumer.subscribe([topic])
    try:
        deadline = 30.0
        message = None
        while deadline > 0 and message is None:
            message = consumer.poll(1.0)
            deadline -= 1
        assert message is not None and message.value() == b"for the group"
    finally:
        consumer.close()


@pytest.mark.integration
def test_wrong_password_is_refused(broker_process: BrokerProcess) -> None:
    reported: list[str] = []
    config = {
        "bootstrap.servers": f"127.0.0.1:{broker_process.sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "nope",
        "error_cb": lambda err: reported.append(str(err)),
    }
    assert_refused(config, reported, "Authentication failed: Invalid username or password")


@pytest.mark.integration
def test_kafka_python_authenticates_with_plain(broker_process: BrokerProcess) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{broker_process.sasl_port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
    )
    assert isinstance(admin.list_topics(), list)
    admin.close()


@pytest.mark.integration
def test_sasl_on_a_listener_without_sasl_is_refused_in_kafkas_terms(broker_process: BrokerProcess) -> None:
    """A client set up for SASL but given the PLAINTEXT port gets ILLEGAL_SASL_STATE, as from Kafka.
    The handshake's answer once named a field SaslHandshake does not have, so the broker failed to
    build it, logged a traceback for every attempt and left the client waiting."""
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    with connect(f"127.0.0.1:{broker_process.kafka_port}") as sock:
        handshake = roundtrip(sock, SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code is ErrorCode.illegal_sasl_state
        authenticate = roundtrip(sock, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)
        assert authenticate.error_code is ErrorCode.illegal_sasl_state
        assert authenticate.error_message == "this listener does not use SASL"
