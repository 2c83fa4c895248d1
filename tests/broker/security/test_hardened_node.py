"""One node set up as docs/security.md's hardening checklist says, walked end to end with real
clients: only SASL_SSL (SCRAM-SHA-512) and SSL (mutual TLS) listeners, no PLAINTEXT; ACLs with
``allow.everyone.if.no.acl.found=false``; the schema registry, the Iceberg REST catalog and the admin
API on HTTPS with Basic auth and read-only vs read-write users; a table topic committed by the
in-process job runner. The first operator is a super user by client certificate, so no listener
without TLS and authentication is ever needed."""

from __future__ import annotations

import secrets
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_clients import assert_refused
from tests.support.ports import free_port
from tests.support.table_node import table_configs
from tests.support.tls_certs import CertFiles, TestCA
from tests.support.waiting import wait_until_sync

# SCRAM-SHA-512 users: the broker's own (inter-broker), an application granted by ACLs, one granted
# nothing, and the HTTP services' read-write and read-only users.
USERS = {name: secrets.token_urlsafe(12) for name in ("broker", "alice", "mallory", "writer", "reader")}
OPERATOR_CN, SENSOR_CN = "ops-admin", "sensor-app"
ORDERS, SENSORS, EVENTS = "orders", "sensors", "events"


def principal(common_name: str) -> str:
    """The principal of a client certificate of the test CA, as Kafka's principal builder names it."""
    return f"User:CN={common_name},O=tabletopic tests,C=NL"


@dataclass
class HardenedNode:
    process: BrokerProcess
    ca: TestCA
    operator: CertFiles
    sensor: CertFiles
    sasl_ssl: str
    ssl: str
    registry: str
    catalog: str
    admin: str

    @property
    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca.cert))

    def scram(self, user: str, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.sasl_ssl,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca.cert),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": USERS[user],
            **extra,
        }

    def mtls(self, certificate: CertFiles, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.ssl,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca.cert),
            "ssl.certificate.location": str(certificate.cert),
            "ssl.key.location": str(certificate.key),
            **extra,
        }


def _hardened_settings(
    ca: TestCA, server: CertFiles, sasl_ssl: int, mtls: int, http: list[str]
) -> dict[str, str]:
    registry, catalog, admin = http
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="broker" password="{USERS["broker"]}";'
    )
    return {
        "listeners": f"SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{mtls}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.plain.users": "",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
        "ssl.keystore.location": str(server.combined),
        "ssl.truststore.location": str(ca.cert),
        "ssl.client.auth": "required",  # the SSL listener; SASL_SSL clients log in with SCRAM (KIP-684)
        "ssl.enabled.protocols": "TLSv1.3",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:broker;{principal(OPERATOR_CN)}",
        "schema.registry.listener": registry,
        "catalog.listener": catalog,
        "admin.listener": admin,
        "http.ssl.client.auth": "none",  # Basic auth on the HTTP services
        "authentication.method": "BASIC",
        "http.readwrite.users": "writer",
        "http.oauth.token.secret": secrets.token_hex(32),
        "table.job.runner": "inprocess",
    }


def _set_up_as_operator(node: HardenedNode) -> None:
    """Over the SSL listener as the operator (a super user by certificate): SCRAM users, topics and
    the applications' ACLs."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(node.mtls(node.operator))  # must outlive its futures
    upsertions = [
        UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), pw.encode()
        )
        for user, pw in USERS.items()
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(30)
    topics = [NewTopic(ORDERS, 1), NewTopic(SENSORS, 1), NewTopic(EVENTS, 1, config=table_configs())]
    for future in admin.create_topics(topics, request_timeout=30).values():
        future.result(30)

    def allow(rtype: Any, name: str, who: str, operation: Any) -> AclBinding:
        return AclBinding(
            rtype, name, ResourcePatternType.LITERAL, who, "*", operation, AclPermissionType.ALLOW
        )

    alice, sensor = "User:alice", principal(SENSOR_CN)
    acls = [
        *(
            allow(ResourceType.TOPIC, t, alice, op)
            for t in (ORDERS, EVENTS)
            for op in (AclOperation.WRITE, AclOperation.READ)
        ),
        allow(ResourceType.GROUP, "alice-app", alice, AclOperation.READ),
        allow(ResourceType.TOPIC, SENSORS, sensor, AclOperation.WRITE),
        allow(ResourceType.TOPIC, SENSORS, sensor, AclOperation.READ),
        allow(ResourceType.GROUP, "sensor-app", sensor, AclOperation.READ),
    ]
    for future in admin.create_acls(acls, request_timeout=30).values():
        future.result(30)


@pytest.fixture(scope="module")
def hardened_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HardenedNode]:
    root = tmp_path_factory.mktemp("hardened")
    ca = TestCA(root / "ca")
    server = ca.issue("localhost", server=True)
    operator, sensor = ca.issue(OPERATOR_CN), ca.issue(SENSOR_CN)
    sasl_ssl, mtls = free_port(), free_port()
    http = [f"https://127.0.0.1:{free_port()}" for _ in range(3)]
    process = BrokerProcess(root / "data", overrides=_hardened_settings(ca, server, sasl_ssl, mtls, http))
    process.kafka_port = sasl_ssl  # what start() waits for
    process.start()
    try:
        node = HardenedNode(
            process, ca, operator, sensor, f"127.0.0.1:{sasl_ssl}", f"127.0.0.1:{mtls}", *http
        )
        _set_up_as_operator(node)
        yield node
    finally:
        process.stop()


def _produce(config: dict[str, Any], topic: str, values: list[bytes]) -> list[str | None]:
    """Each record's delivery error name (None: acknowledged)."""
    from confluent_kafka import Producer

    outcomes: list[str | None] = []
    producer = Producer({**config, "message.timeout.ms": 10000})
    for value in values:
        producer.produce(
            topic, value, on_delivery=lambda err, _msg: outcomes.append(err.name() if err else None)
        )
    producer.flush(20)
    return outcomes


def _consume(config: dict[str, Any], topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**config, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.integration
def test_a_scram_user_granted_by_acls_produces_and_consumes_over_sasl_ssl(
    hardened_node: HardenedNode,
) -> None:
    values = [f"order-{i}".encode() for i in range(3)]
    assert _produce(hardened_node.scram("alice"), ORDERS, values) == [None] * 3
    assert _consume(hardened_node.scram("alice", **{"group.id": "alice-app"}), ORDERS, 3) == values


@pytest.mark.integration
def test_a_mutual_tls_principal_produces_and_consumes_over_ssl(hardened_node: HardenedNode) -> None:
    sensor = hardened_node.mtls(hardened_node.sensor)
    assert _produce(sensor, SENSORS, [b"21.5", b"21.7"]) == [None, None]
    assert _consume({**sensor, "group.id": "sensor-app"}, SENSORS, 2) == [b"21.5", b"21.7"]


@pytest.mark.integration
def test_principals_without_an_acl_are_refused_with_topic_authorization_failed(
    hardened_node: HardenedNode,
) -> None:
    assert _produce(hardened_node.scram("mallory"), ORDERS, [b"x"]) == ["TOPIC_AUTHORIZATION_FAILED"]
    # The sensor's certificate grants it its own topic, not alice's.
    sensor = hardened_node.mtls(hardened_node.sensor)
    assert _produce(sensor, ORDERS, [b"x"]) == ["TOPIC_AUTHORIZATION_FAILED"]


@pytest.mark.integration
def test_a_client_without_a_certificate_is_refused_on_the_ssl_listener(hardened_node: HardenedNode) -> None:
    reported: list[str] = []
    anonymous = {
        "bootstrap.servers": hardened_node.ssl,
        "security.protocol": "SSL",
        "ssl.ca.location": str(hardened_node.ca.cert),
        "error_cb": lambda err: reported.append(str(err)),
    }
    assert_refused(anonymous, reported)


@pytest.mark.integration
def test_a_table_topic_is_committed_and_read_through_the_https_catalog(
    hardened_node: HardenedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import ForbiddenError

    values = [f'{{"event": {i}}}'.encode() for i in range(5)]
    assert _produce(hardened_node.scram("alice"), EVENTS, values) == [None] * 5
    reader = ("reader", USERS["reader"])

    def all_committed() -> bool:
        url = f"{hardened_node.admin}/v1/tables/{EVENTS}"
        answer = httpx.get(url, auth=reader, verify=hardened_node.trust)
        assert answer.status_code in (200, 404), answer.text  # 404: not picked up yet
        return answer.status_code == 200 and answer.json()["committed_offsets"].get("0", 0) >= len(values)

    wait_until_sync(all_committed, timeout=40, interval=0.5)
    # requests lets these variables override a session's own CA bundle (pyiceberg's ssl.cabundle).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    catalog = RestCatalog(
        "hardened",
        uri=hardened_node.catalog,
        credential=f"reader:{USERS['reader']}",
        ssl={"cabundle": str(hardened_node.ca.cert)},
    )
    assert ("default", EVENTS) in catalog.list_tables("default")
    rows = catalog.load_table(f"default.{EVENTS}").scan().to_arrow().to_pylist()
    assert sorted(row["_kafka_metadata"]["offset"] for row in rows) == list(range(len(values)))
    try:
        with pytest.raises(ForbiddenError):
            catalog.create_namespace(f"not_allowed_{uuid.uuid4().hex[:6]}")
    finally:
        # An idle kept-alive TLS connection holds the HTTPS service's shutdown for 10 s.
        catalog._session.close()
    anonymous = httpx.get(f"{hardened_node.catalog}/v1/namespaces", verify=hardened_node.trust)
    assert anonymous.status_code == 401


@pytest.mark.integration
def test_schema_registry_round_trip_over_https_with_read_write_and_read_only_users(
    hardened_node: HardenedNode,
) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    common = {"url": hardened_node.registry, "ssl.ca.location": str(hardened_node.ca.cert)}
    writer = SchemaRegistryClient({**common, "basic.auth.user.info": f"writer:{USERS['writer']}"})
    reader = SchemaRegistryClient({**common, "basic.auth.user.info": f"reader:{USERS['reader']}"})
    schema = Schema('{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}', "AVRO")
    with writer, reader:  # closed after: an idle kept-alive TLS connection holds the shutdown 10 s
        schema_id = writer.register_schema(f"{ORDERS}-value", schema)
        assert reader.get_schema(schema_id).schema_str == writer.get_schema(schema_id).schema_str
        assert reader.get_latest_version(f"{ORDERS}-value").schema_id == schema_id
        with pytest.raises(SchemaRegistryError) as refused:
            reader.register_schema(f"{SENSORS}-value", schema)
    assert refused.value.http_status_code == 403 and refused.value.error_code == 40301
