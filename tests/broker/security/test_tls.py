"""TLS listeners (SSL, SASL_SSL) with PEM keys, optional mutual TLS, and real clients over them."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tabletopic.broker.context import SecurityProtocol
from tabletopic.broker.listeners import Endpoint
from tabletopic.broker.security.listener import ListenerSecurity
from tabletopic.broker.security.store import SecurityStore
from tabletopic.broker.security.tls import peer_principal, server_context
from tabletopic.config import Config, ConfigError
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_clients import assert_refused
from tests.support.ports import free_port
from tests.support.secure_brokers import SCRAM_USERS, SecureBroker, round_trip, secure_overrides
from tests.support.tls_certs import TestCA


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


def test_ssl_listener_without_keys_names_the_keys_to_set() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        server_context(Config({}))


def test_required_client_auth_without_truststore_is_refused(ca: TestCA) -> None:
    server = ca.issue("localhost", server=True)
    config = Config(
        {
            "ssl.certificate.location": str(server.cert),
            "ssl.key.location": str(server.key),
            "ssl.client.auth": "required",
        }
    )
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.location"):
        server_context(config)


def test_unreadable_keystore_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "bad.pem").write_text("not a pem")
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        server_context(Config({"ssl.keystore.location": str(tmp_path / "bad.pem")}))


def test_inline_pem_keys_load(ca: TestCA) -> None:
    server = ca.issue("localhost", server=True)
    config = Config(
        {
            "ssl.keystore.certificate.chain": server.cert.read_text(),
            "ssl.keystore.key": server.key.read_text(),
            "ssl.truststore.certificates": ca.cert.read_text(),
            "ssl.client.auth": "requested",
        }
    )
    assert server_context(config).verify_mode is ssl.CERT_OPTIONAL


def test_plaintext_only_broker_needs_no_tls_keys(tmp_path: Path) -> None:
    from tabletopic import database

    engine = database.create_engine(database.default_url(tmp_path))
    plaintext = Endpoint(SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092)
    security = ListenerSecurity(Config({}), SecurityStore(engine), [plaintext])
    assert security.tls_context(plaintext) is None
    assert security.sasl_server(SecurityProtocol.PLAINTEXT) is None


def test_unknown_sasl_mechanism_is_refused_by_name(tmp_path: Path) -> None:
    from tabletopic import database

    engine = database.create_engine(database.default_url(tmp_path))
    with pytest.raises(ConfigError, match=r"sasl\.enabled\.mechanisms: GSSAPI"):
        ListenerSecurity(
            Config({"sasl.enabled.mechanisms": "GSSAPI"}),
            SecurityStore(engine),
            [Endpoint(SecurityProtocol.SASL_PLAINTEXT, "127.0.0.1", 9093)],
        )


def test_peer_principal_is_the_rfc2253_subject() -> None:
    class Peer:
        def getpeercert(self) -> dict[str, object]:
            subject = (
                (("countryName", "NL"),),
                (("organizationName", "Acme, Inc"),),
                (("commonName", "app"),),
            )
            return {"subject": subject}

    assert peer_principal(Peer()) == "User:CN=app,O=Acme\\, Inc,C=NL"
    assert peer_principal(None) is None


# --- real clients --------------------------------------------------------------------------------


def _ssl(secure: SecureBroker, **extra: str) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.ca.location": str(secure.ca.cert), **extra}


@pytest.mark.integration
def test_confluent_kafka_over_ssl(secure_broker: SecureBroker) -> None:
    round_trip(secure_broker.ssl, _ssl(secure_broker))


@pytest.mark.integration
def test_confluent_kafka_over_ssl_with_a_client_certificate(secure_broker: SecureBroker) -> None:
    client = secure_broker.client
    round_trip(
        secure_broker.ssl,
        _ssl(
            secure_broker,
            **{"ssl.certificate.location": str(client.cert), "ssl.key.location": str(client.key)},
        ),
    )


@pytest.mark.integration
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_over_sasl_ssl(secure_broker: SecureBroker, mechanism: str) -> None:
    config = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secure_broker.ca.cert),
        "sasl.mechanism": mechanism,
        "sasl.username": "carol",
        "sasl.password": SCRAM_USERS["carol"],
    }
    round_trip(secure_broker.sasl_ssl, config)


@pytest.mark.integration
def test_metadata_advertises_the_ssl_listener_to_ssl_clients(secure_broker: SecureBroker) -> None:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": secure_broker.ssl, **_ssl(secure_broker)}).list_topics(
        timeout=15
    )
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", secure_broker.ssl_port)]


@pytest.mark.integration
def test_kafka_python_over_sasl_ssl_with_scram(secure_broker: SecureBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    common = {
        "bootstrap_servers": secure_broker.sasl_ssl,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(secure_broker.ca.cert),
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "dave",
        "sasl_plain_password": SCRAM_USERS["dave"],
    }
    topic = f"kp-tls-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**common)
    producer.send(topic, b"over tls").get(30)
    producer.close()
    consumer = KafkaConsumer(**common, consumer_timeout_ms=15000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    record = next(consumer)  # the first record, not the whole timeout waiting for a second one
    consumer.close()
    assert (record.offset, record.value) == (0, b"over tls")


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_over_ssl(secure_broker: SecureBroker) -> None:
    topic = f"kcat-tls-{uuid.uuid4().hex[:8]}"
    base = [
        "kcat",
        "-b",
        secure_broker.ssl,
        "-X",
        "security.protocol=SSL",
        "-X",
        f"ssl.ca.location={secure_broker.ca.cert}",
        "-t",
        topic,
    ]
    subprocess.run([*base, "-P"], input=b"kcat over tls\n", check=True, timeout=30)
    out = subprocess.run([*base, "-C", "-o", "beginning", "-c", "1", "-e"], capture_output=True, timeout=30)
    assert out.stdout.strip() == b"kcat over tls", out.stderr


@pytest.mark.integration
def test_plaintext_bytes_on_the_ssl_port_do_not_hurt_the_listener(secure_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure_broker.ssl_port), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x10" + b"not a tls hello!")
        try:
            sock.recv(100)
        except OSError:
            pass
    round_trip(secure_broker.ssl, _ssl(secure_broker))


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory: pytest.TempPathFactory, ca: TestCA) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker whose SSL listener requires a client certificate (ssl.client.auth=required)."""
    process = BrokerProcess(tmp_path_factory.mktemp("mtls"))
    process.kafka_port, process.admin_port, process.sasl_port = free_port(), free_port(), free_port()
    ssl_port = free_port()
    server = ca.issue("localhost", server=True)
    process.overrides = {
        **secure_overrides(ca, server, plaintext=process.kafka_port, ssl=ssl_port),
        "ssl.client.auth": "required",
    }
    process.start()
    yield process, ssl_port
    process.stop()


@pytest.mark.integration
def test_required_client_auth_refuses_clients_without_a_certificate(
    mtls_broker: tuple[BrokerProcess, int], ca: TestCA
) -> None:
    _, port = mtls_broker
    bootstrap = f"127.0.0.1:{port}"
    reported: list[str] = []
    anonymous = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.cert),
        "error_cb": lambda err: reported.append(str(err)),
    }
    assert_refused(anonymous, reported)
    client = ca.issue("mtls-client")
    config = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.cert),
        "ssl.certificate.location": str(client.cert),
        "ssl.key.location": str(client.key),
    }
    round_trip(bootstrap, config)


@pytest.mark.integration
def test_certificates_of_another_ca_are_refused(
    mtls_broker: tuple[BrokerProcess, int], tmp_path: Path, ca: TestCA
) -> None:
    _, port = mtls_broker
    stranger = TestCA(tmp_path / "other", name="other CA").issue("intruder")
    reported: list[str] = []
    config = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.cert),
        "ssl.certificate.location": str(stranger.cert),
        "ssl.key.location": str(stranger.key),
        "error_cb": lambda err: reported.append(str(err)),
    }
    assert_refused(config, reported)
