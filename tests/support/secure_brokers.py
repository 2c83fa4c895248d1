"""The brokers with secured listeners the security tests share, described: one with every kind of
listener (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL) and a throwaway CA, one with named listeners and
an OAUTHBEARER issuer; the overrides that make them, and SCRAM users created through the Kafka
admin API. The session fixtures that start them are in ``tests/broker/security/conftest.py``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tests.support.broker_process import BrokerProcess
from tests.support.jwt_issuer import JwtIssuer
from tests.support.tls_certs import CertFiles, TestCA

SCRAM_USERS = {"carol": "carol-secret", "dave": "dave-secret"}


@dataclass
class SecureBroker:
    process: BrokerProcess
    ca: TestCA
    client: CertFiles
    ssl_port: int
    sasl_ssl_port: int

    @property
    def plaintext(self) -> str:
        return self.process.bootstrap

    @property
    def sasl_plaintext(self) -> str:
        return f"127.0.0.1:{self.process.sasl_port}"

    @property
    def ssl(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def sasl_ssl(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"


def secure_overrides(ca: TestCA, server: CertFiles, **ports: int) -> dict[str, str]:
    listeners = ",".join(f"{protocol.upper()}://127.0.0.1:{port}" for protocol, port in ports.items())
    return {
        "listeners": listeners,
        "ssl.keystore.location": str(server.combined),
        "ssl.truststore.location": str(ca.cert),
    }


def create_scram_users(bootstrap: str, users: dict[str, str], mechanisms: tuple[str, ...]) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsertions = [
        UserScramCredentialUpsertion(
            user, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 4096), password.encode()
        )
        for user, password in users.items()
        for m in mechanisms
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(30)


@dataclass
class NamedListenersBroker:
    """INTERNAL (PLAINTEXT, what the node's own clients use) and EXTERNAL (SASL_PLAINTEXT with PLAIN
    and OAUTHBEARER, advertised as ``localhost``) listeners on one broker; ``issuer`` signs tokens."""

    process: BrokerProcess
    internal_port: int
    external_port: int
    issuer: JwtIssuer

    @property
    def internal(self) -> str:
        return f"127.0.0.1:{self.internal_port}"

    @property
    def external(self) -> str:
        return f"127.0.0.1:{self.external_port}"


def named_listener_overrides(internal_port: int, external_port: int) -> dict[str, str]:
    return {
        "listeners": f"INTERNAL://127.0.0.1:{internal_port},EXTERNAL://127.0.0.1:{external_port}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "advertised.listeners": f"EXTERNAL://localhost:{external_port}",
        "inter.broker.listener.name": "INTERNAL",
    }


def sasl_login(mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
    """A librdkafka client's settings to log in as ``user`` with ``mechanism``."""
    return {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def round_trip(bootstrap: str, config: dict[str, str]) -> None:
    """Produce one record to a new topic and read it back, both clients with ``config``: the login
    holds for a producer and a consumer."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"sec-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, **config})
    producer.produce(topic, b"guarded")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, **config})
    consumer.assign([TopicPartition(topic, 0, 0)])
    message = consumer.poll(15)
    consumer.close()
    assert message is not None and message.error() is None and message.value() == b"guarded"
