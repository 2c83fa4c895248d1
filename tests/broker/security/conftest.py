"""The secured brokers this package's tests share, one process each for the session: one with every
kind of listener (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL) and SCRAM users, one with named
listeners and an OAUTHBEARER issuer (described in ``tests/support/secure_brokers.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.jwt_issuer import JwtIssuer
from tests.support.ports import free_port
from tests.support.secure_brokers import (
    SCRAM_USERS,
    NamedListenersBroker,
    SecureBroker,
    create_scram_users,
    named_listener_overrides,
    secure_overrides,
)
from tests.support.tls_certs import TestCA


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
