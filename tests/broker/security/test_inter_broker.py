"""The broker's own connections to its cluster's listeners (transaction markers, the dead-letter
producer): TLS with its truststore and SASL with the credentials of
``listener.name.<listener>.<mechanism>.sasl.jaas.config``, checked against a real secured broker."""

from __future__ import annotations

import socket

import pytest

from tabletopic.broker import wire_client
from tabletopic.broker.security.inter_broker import InterBrokerClient, jaas_credentials
from tabletopic.config import Config, ConfigError
from tests.support.ports import free_port
from tests.support.secure_brokers import SCRAM_USERS, SecureBroker, round_trip

API_VERSIONS, METADATA = 18, 3


def _jaas(user: str, password: str) -> str:
    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    return f'{module} required username="{user}" password="{password}";'


def test_jaas_credentials_are_read_as_kafka_writes_them() -> None:
    assert jaas_credentials(_jaas("broker", 'se\\"cret')) == ("broker", 'se"cret')
    assert jaas_credentials('PlainLoginModule required username="a";') is None


def test_a_sasl_inter_broker_listener_without_credentials_names_the_key() -> None:
    config = Config({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    with pytest.raises(ConfigError, match=r"listener\.name\.internal\.scram-sha-512\.sasl\.jaas\.config"):
        InterBrokerClient.from_config(config, "INTERNAL", "SASL_SSL")


def _client(
    broker: SecureBroker, mechanism: str, user: str, password: str, protocol: str
) -> InterBrokerClient:
    config = Config(
        {
            "ssl.truststore.location": str(broker.ca.cert),
            "ssl.keystore.location": str(broker.client.combined),
            "sasl.mechanism.inter.broker.protocol": mechanism,
            f"listener.name.{protocol.lower()}.{mechanism.lower()}.sasl.jaas.config": _jaas(user, password),
        }
    )
    return InterBrokerClient.from_config(config, protocol, protocol)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("mechanism", "protocol"),
    [("SCRAM-SHA-512", "SASL_SSL"), ("SCRAM-SHA-256", "SASL_PLAINTEXT"), ("PLAIN", "SASL_SSL")],
)
def test_the_broker_logs_in_to_a_secured_listener(
    secure_broker: SecureBroker, mechanism: str, protocol: str
) -> None:
    client = _client(secure_broker, mechanism, "carol", SCRAM_USERS["carol"], protocol)
    address = secure_broker.sasl_ssl if protocol == "SASL_SSL" else secure_broker.sasl_plaintext
    # Metadata is refused before a SASL login: an answer proves the login went through.
    answer = wire_client.call(address, METADATA, 9, 10.0, client.connect, topics=None)
    assert [b.node_id for b in answer.brokers]
    round_trip(address, client.librdkafka())  # the same settings, as the dead-letter producer uses them


@pytest.mark.integration
def test_a_wrong_inter_broker_password_says_which_key_to_check(secure_broker: SecureBroker) -> None:
    client = _client(secure_broker, "SCRAM-SHA-256", "carol", "wrong", "SASL_SSL")
    with pytest.raises(
        wire_client.WireError, match=r"listener\.name\.sasl_ssl\.scram-sha-256\.sasl\.jaas\.config"
    ):
        wire_client.call(secure_broker.sasl_ssl, API_VERSIONS, 3, 10.0, client.connect)


@pytest.mark.integration
def test_a_pool_asks_the_first_reachable_server_again_on_the_connection_it_logged_in_with(
    secure_broker: SecureBroker,
) -> None:
    """``partitions move`` asks for the leader every 50 ms until it moved: one TLS handshake and
    SCRAM login for all of them, not one a question (a SCRAM login costs the broker a PBKDF2)."""
    client = _client(secure_broker, "SCRAM-SHA-512", "carol", SCRAM_USERS["carol"], "SASL_SSL")
    opened: list[tuple[str, int]] = []

    def counting_connect(host: str, port: int, timeout: float) -> socket.socket:
        opened.append((host, port))
        return client.connect(host, port, timeout)

    pool = wire_client.ConnectionPool(counting_connect)
    unreachable = f"127.0.0.1:{free_port()}"  # nothing listens there
    try:
        for _ in range(5):
            answer = pool.call_first(
                f"{unreachable},{secure_broker.sasl_ssl}", METADATA, 9, 10.0, topics=None
            )
            assert [b.node_id for b in answer.brokers]
    finally:
        pool.close()
    broker_host, _, broker_port = secure_broker.sasl_ssl.rpartition(":")
    # The unreachable server is tried each time (it might come back), the broker connected to once.
    assert opened.count((broker_host, int(broker_port))) == 1
    with pytest.raises(wire_client.WireError, match="no broker of"):
        wire_client.ConnectionPool(counting_connect).call_first(unreachable, METADATA, 9, 1.0, topics=None)
