"""One broker process with every kind of listener (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL), a
throwaway CA for its certificates, and SCRAM users created through the Kafka admin API."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.jwt_issuer import JwtIssuer
from tests.support.ports import free_port
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


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    root: Path = tmp_path_factory.mktemp("secure-broker")
    ca = TestCA(root / "ca")
    server = ca.issue("localhost", server=True)
    client = ca.issue("app-client")
    process = BrokerProcess(root / "data")
    process.kafka_port, process.admin_port, process.sasl_port = free_port(), free_port(), free_port()
    ssl_port, sasl_ssl_port = free_port(), free_port()
    process.overrides = {
        **secure_overrides(
            ca,
            server,
            plaintext=process.kafka_port,
            sasl_plaintext=process.sasl_port,
            ssl=ssl_port,
            sasl_ssl=sasl_ssl_port,
        ),
        "ssl.client.auth": "requested",
    }
    process.start()
    try:
        create_scram_users(process.bootstrap, SCRAM_USERS, ("SCRAM-SHA-256", "SCRAM-SHA-512"))
        yield SecureBroker(process, ca, client, ssl_port, sasl_ssl_port)
    finally:
        process.stop()


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


@pytest.fixture(scope="session")
def named_listeners_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamedListenersBroker]:
    root = tmp_path_factory.mktemp("named-listeners")
    issuer = JwtIssuer(root / "issuer")
    process = BrokerProcess(root / "data")
    process.kafka_port, process.admin_port, process.sasl_port = free_port(), free_port(), free_port()
    process.overrides = {
        **named_listener_overrides(process.kafka_port, process.sasl_port),
        **issuer.server_settings(),
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
    }
    process.start()
    try:
        yield NamedListenersBroker(process, process.kafka_port, process.sasl_port, issuer)
    finally:
        process.stop()
