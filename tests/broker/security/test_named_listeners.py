"""Named listeners (``listener.security.protocol.map``): one broker with an INTERNAL plaintext and an
EXTERNAL SASL listener; each client is told the endpoint of the listener it came in on."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tabletopic.broker.context import SecurityProtocol
from tabletopic.broker.listeners import (
    advertised_endpoints,
    configured_listeners,
    inter_broker_listener,
    parse_listener,
)
from tabletopic.config import Config, ConfigError
from tests.support.secure_brokers import NamedListenersBroker


def test_listener_names_take_their_protocol_from_the_map(tmp_path: Any) -> None:
    config = Config(
        {
            "data.dir": str(tmp_path),
            "listeners": "INTERNAL://0.0.0.0:9093,EXTERNAL://:9094,SSL://127.0.0.1:9095",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,external:SASL_SSL",
            "advertised.listeners": "EXTERNAL://kafka.example.com:19094",
            "inter.broker.listener.name": "internal",
        }
    )
    listeners = configured_listeners(config)
    assert [(e.name, e.protocol) for e in listeners] == [
        ("INTERNAL", SecurityProtocol.PLAINTEXT),
        ("EXTERNAL", SecurityProtocol.SASL_SSL),
        ("SSL", SecurityProtocol.SSL),
    ]
    advertised = advertised_endpoints(config, listeners)
    assert (advertised["INTERNAL"].host, advertised["INTERNAL"].port) == ("127.0.0.1", 9093)
    assert (advertised["EXTERNAL"].host, advertised["EXTERNAL"].port) == ("kafka.example.com", 19094)
    assert inter_broker_listener(config, advertised) == "INTERNAL"


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        ({"listeners": "EXTERNAL://:9094"}, "listener.security.protocol.map"),
        (
            {"listeners": "A://:1", "listener.security.protocol.map": "A:TLS"},
            "listener.security.protocol.map",
        ),
        ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "used more than once"),
        ({"advertised.listeners": "SSL://h:1"}, "advertised.listeners: SSL is not a listener"),
        ({"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name"),
    ],
)
def test_bad_listener_settings_name_the_key_to_change(
    tmp_path: Any, settings: dict[str, str], names: str
) -> None:
    config = Config({"data.dir": str(tmp_path), **settings})
    with pytest.raises(ConfigError, match=names):
        listeners = configured_listeners(config)
        inter_broker_listener(config, advertised_endpoints(config, listeners))


def test_listener_without_a_name_is_its_protocol() -> None:
    endpoint = parse_listener("sasl_ssl://[::1]:9092")
    assert (endpoint.name, endpoint.protocol, endpoint.host) == ("SASL_SSL", SecurityProtocol.SASL_SSL, "::1")


def _metadata_brokers(config: dict[str, Any]) -> list[tuple[str, int]]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(config).list_topics(timeout=15)
    return [(b.host, b.port) for b in metadata.brokers.values()]


@pytest.mark.integration
def test_clients_of_two_named_listeners_each_get_their_own_endpoints(
    named_listeners_broker: NamedListenersBroker,
) -> None:
    from confluent_kafka import Consumer, Producer

    broker = named_listeners_broker
    internal = {"bootstrap.servers": broker.internal}
    external = {
        "bootstrap.servers": broker.external,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    assert _metadata_brokers(internal) == [("127.0.0.1", broker.internal_port)]
    # EXTERNAL advertises "localhost": a client that came in there is sent to its own listener.
    assert _metadata_brokers(external) == [("localhost", broker.external_port)]

    topic = f"named-{uuid.uuid4().hex[:8]}"
    producer = Producer({**internal, "message.timeout.ms": 10000})
    producer.produce(topic, b"across listeners")
    assert producer.flush(15) == 0
    consumer = Consumer({**external, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        values = []
        for _ in range(30):
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                values.append(message.value())
                break
    finally:
        consumer.close()
    assert values == [b"across listeners"]


@pytest.mark.integration
def test_users_and_acls_commands_find_the_node_from_its_data_directory(
    named_listeners_broker: NamedListenersBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --bootstrap-server: the node's endpoints.properties names INTERNAL (mapped to PLAINTEXT)."""
    from typer.testing import CliRunner

    from tabletopic.cli import app

    monkeypatch.delenv("TABLETOPIC_BOOTSTRAP", raising=False)
    data_dir = str(named_listeners_broker.process.data_dir)
    runner = CliRunner()
    added = runner.invoke(app, ["users", "-d", data_dir, "add", "erin", "--password", "erin-pw"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["users", "-d", data_dir, "list", "erin"])
    assert listed.exit_code == 0 and listed.output.startswith("erin\tSCRAM-SHA-256"), listed.output
    # No authorizer here: nothing listed (librdkafka drops DescribeAcls' SECURITY_DISABLED), but reached.
    acls = runner.invoke(app, ["acls", "-d", data_dir, "list", "-o", "read"])
    assert acls.exit_code == 0 and acls.output == "", acls.output
    nowhere = runner.invoke(app, ["acls", "--override", "listeners=PLAINTEXT://127.0.0.1:1", "list"])
    assert nowhere.exit_code == 1 and "no Kafka listener at 127.0.0.1:1" in nowhere.output, nowhere.output
