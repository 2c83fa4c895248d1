"""Per-listener TLS settings, as Kafka takes them: ``listener.name.<listener>.ssl.*`` before the
broker-wide ``ssl.*``, ``ssl.client.auth`` on SASL_SSL listeners only from the listener's own key
(KIP-684), and the HTTPS services' own ``http.ssl.*`` keys."""

from __future__ import annotations

import http.server
import logging
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tabletopic import database
from tabletopic.broker.context import SecurityProtocol
from tabletopic.broker.listeners import Endpoint
from tabletopic.broker.security.http_auth import https_client_options, https_options
from tabletopic.broker.security.inter_broker import InterBrokerClient
from tabletopic.broker.security.listener import ListenerSecurity, warn_unused_listener_keys
from tabletopic.broker.security.store import SecurityStore
from tabletopic.broker.security.tls import client_context, unused_listener_keys
from tabletopic.config import Config, ConfigError
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_clients import assert_refused
from tests.support.ports import free_port
from tests.support.secure_brokers import SCRAM_USERS, create_scram_users, round_trip
from tests.support.tls_certs import CertFiles, TestCA

SSL, SASL_SSL = SecurityProtocol.SSL, SecurityProtocol.SASL_SSL


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("listener-ca"))


@pytest.fixture(scope="module")
def server_cert(ca: TestCA) -> CertFiles:
    return ca.issue("localhost", server=True)


def _tls_keys(ca: TestCA, server: CertFiles, **more: str) -> Config:
    return Config(
        {"ssl.keystore.location": str(server.combined), "ssl.truststore.location": str(ca.cert), **more}
    )


def _security(config: Config, tmp_path: Path, *listeners: Endpoint) -> ListenerSecurity:
    engine = database.create_engine(database.default_url(tmp_path))
    return ListenerSecurity(config, SecurityStore(engine), listeners)


def _modes(security: ListenerSecurity, *listeners: Endpoint) -> list[ssl.VerifyMode]:
    modes = []
    for endpoint in listeners:
        context = security.tls_context(endpoint)
        assert context is not None
        modes.append(context.verify_mode)
    return modes


def test_a_listener_key_overrides_the_broker_wide_key_for_that_listener_only(
    ca: TestCA, server_cert: CertFiles, tmp_path: Path
) -> None:
    external, internal = (
        Endpoint(SSL, "0.0.0.0", 9094, "EXTERNAL"),
        Endpoint(SSL, "127.0.0.1", 9093, "INTERNAL"),
    )
    config = _tls_keys(ca, server_cert, **{"listener.name.external.ssl.client.auth": "required"})
    security = _security(config, tmp_path, external, internal)
    assert _modes(security, external, internal) == [ssl.CERT_REQUIRED, ssl.CERT_NONE]


def test_sasl_ssl_listeners_take_client_auth_only_from_their_own_key(
    ca: TestCA, server_cert: CertFiles, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """KIP-684: the broker-wide ssl.client.auth is for SSL listeners; SASL clients log in with SASL."""
    ssl_listener = Endpoint(SSL, "0.0.0.0", 9094)
    sasl_ssl = Endpoint(SASL_SSL, "0.0.0.0", 9095)
    strict = Endpoint(SASL_SSL, "0.0.0.0", 9096, "STRICT")
    config = _tls_keys(
        ca,
        server_cert,
        **{"ssl.client.auth": "required", "listener.name.strict.ssl.client.auth": "requested"},
    )
    with caplog.at_level(logging.INFO):
        security = _security(config, tmp_path, ssl_listener, sasl_ssl, strict)
    assert _modes(security, ssl_listener, sasl_ssl, strict) == [
        ssl.CERT_REQUIRED,
        ssl.CERT_NONE,
        ssl.CERT_OPTIONAL,
    ]
    # Said at start, naming the key, for a node that relied on the old behaviour.
    assert "listener SASL_SSL asks for no client certificate" in caplog.text
    assert "listener.name.sasl_ssl.ssl.client.auth" in caplog.text
    assert "STRICT" not in caplog.text


def test_listener_keys_are_checked_and_errors_name_them(
    ca: TestCA, server_cert: CertFiles, tmp_path: Path
) -> None:
    external = Endpoint(SSL, "0.0.0.0", 9094, "EXTERNAL")
    bad_value = _tls_keys(ca, server_cert, **{"listener.name.external.ssl.client.auth": "always"})
    with pytest.raises(ConfigError, match=r"listener\.name\.external\.ssl\.client\.auth"):
        _security(bad_value, tmp_path, external)
    no_truststore = Config(
        {
            "ssl.keystore.location": str(server_cert.combined),
            "listener.name.external.ssl.client.auth": "required",
        }
    )
    with pytest.raises(ConfigError, match=r"listener\.name\.external\.ssl\.client\.auth=required needs "):
        _security(no_truststore, tmp_path, external)
    (tmp_path / "bad.pem").write_text("not a pem")
    bad_file = _tls_keys(
        ca, server_cert, **{"listener.name.external.ssl.keystore.location": str(tmp_path / "bad.pem")}
    )
    with pytest.raises(ConfigError, match=r"listener\.name\.external\.ssl\.keystore\.location"):
        _security(bad_file, tmp_path, external)
    with pytest.raises(ConfigError, match=r"listener\.name\.external\.ssl\.enabled\.protocols"):
        _security(
            _tls_keys(ca, server_cert, **{"listener.name.external.ssl.enabled.protocols": "SSLv3"}),
            tmp_path,
            external,
        )


def test_a_listener_may_have_its_own_certificate(ca: TestCA, server_cert: CertFiles, tmp_path: Path) -> None:
    external = Endpoint(SSL, "0.0.0.0", 9094, "EXTERNAL")
    own = ca.issue("external.example.com", server=True)
    config = Config({"listener.name.external.ssl.keystore.location": str(own.combined)})
    context = _security(config, tmp_path, external).tls_context(external)
    assert context is not None and context.verify_mode == ssl.CERT_NONE


def test_a_broker_calls_a_peers_https_api_with_its_encrypted_key(ca: TestCA, server_cert: CertFiles) -> None:
    """The admin API client one broker uses to ask another (the cluster's table topics) presents
    its certificate, whose key ``ssl.key.password`` opens, to a peer that asks for one."""
    own = ca.issue("broker-2")
    keys = {
        "http.ssl.certificate.location": str(own.cert),
        "http.ssl.key.location": str(own.encrypted_key("k3y-pw")),
        "http.ssl.truststore.location": str(ca.cert),
    }
    peer = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca.cert))
    peer.load_cert_chain(server_cert.cert, server_cert.key)
    peer.verify_mode = ssl.CERT_REQUIRED
    seen: list[str] = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            subject = dict(pair[0] for pair in self.connection.getpeercert()["subject"])  # type: ignore[attr-defined]
            seen.append(subject["commonName"])
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    server.socket = peer.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        options = https_client_options(Config({**keys, "http.ssl.key.password": "k3y-pw"}))
        answer = httpx.get(f"https://localhost:{server.server_address[1]}/v1/tables", timeout=10, **options)
        assert answer.status_code == 200 and seen == ["broker-2"]
    finally:
        server.shutdown()
        server.server_close()

    with pytest.raises(ConfigError, match=r"http\.ssl\.certificate\.location: .*http\.ssl\.key\.password"):
        https_client_options(Config({**keys, "http.ssl.key.password": "wrong"}))


def test_a_truststore_replaces_the_system_cas_in_the_brokers_own_clients(ca: TestCA) -> None:
    context, _ = client_context(Config({"ssl.truststore.location": str(ca.cert)}))
    assert [cert["subject"] for cert in context.get_ca_certs()] == [
        (
            (("countryName", "NL"),),
            (("organizationName", "tabletopic tests"),),
            (("commonName", "tabletopic test CA"),),
        )
    ]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_the_brokers_own_client_uses_its_listeners_keys(ca: TestCA) -> None:
    config = Config(
        {
            "listener.name.internal.ssl.truststore.location": str(ca.cert),
            "listener.name.internal.ssl.endpoint.identification.algorithm": "",
        }
    )
    client = InterBrokerClient.from_config(config, "INTERNAL", "SSL")
    assert dict(client.tls_rdkafka)["ssl.ca.location"] == str(ca.cert)
    assert client.tls is not None and not client.tls.check_hostname


def test_listener_keys_no_listener_reads_are_reported() -> None:
    config = Config(
        {
            "listener.name.EXTERNAL.ssl.client.auth": "required",  # Kafka lower-cases the name
            "listener.name.external.ssl.client.auht": "required",
            "listener.name.gone.ssl.client.auth": "required",
            "listener.name.external.ssl.client.auth": "required",
            "listener.name.external.scram-sha-512.sasl.jaas.config": "x",
        }
    )
    assert unused_listener_keys(config, ["EXTERNAL"]) == [
        "listener.name.EXTERNAL.ssl.client.auth",
        "listener.name.external.ssl.client.auht",
        "listener.name.gone.ssl.client.auth",
    ]


def test_ssl_keys_of_a_listener_without_tls_are_logged_as_unread(caplog: pytest.LogCaptureFixture) -> None:
    config = Config({"listener.name.internal.ssl.client.auth": "required"})
    internal = Endpoint(SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092, "INTERNAL")
    with caplog.at_level(logging.WARNING):
        warn_unused_listener_keys(config, [internal])
    assert "listener.name.internal.ssl.client.auth is not read" in caplog.text


def test_https_services_take_their_own_keys_first(ca: TestCA, server_cert: CertFiles) -> None:
    url = "https://127.0.0.1:8081"
    shared = _tls_keys(ca, server_cert, **{"ssl.client.auth": "required"})
    assert https_options(shared, url)["ssl_cert_reqs"] == ssl.CERT_REQUIRED  # as before: the broker-wide key
    own = _tls_keys(ca, server_cert, **{"ssl.client.auth": "required", "http.ssl.client.auth": "none"})
    assert "ssl_cert_reqs" not in https_options(own, url)
    other = ca.issue("registry.example.com", server=True)
    split = _tls_keys(
        ca,
        server_cert,
        **{"http.ssl.keystore.location": str(other.combined), "http.ssl.enabled.protocols": "TLSv1.3"},
    )
    options = https_options(split, url)
    assert options["ssl_certfile"] == str(other.combined)
    assert options["tls_versions"] == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    no_truststore = Config(
        {"ssl.keystore.location": str(server_cert.combined), "http.ssl.client.auth": "required"}
    )
    with pytest.raises(ConfigError, match=r"http\.ssl\.client\.auth=required needs "):
        https_options(no_truststore, url)
    with pytest.raises(ConfigError, match=r"http\.ssl\.client\.auth"):
        Config({"http.ssl.client.auth": "always"})


def test_a_node_without_security_keys_is_unchanged(tmp_path: Path) -> None:
    plaintext = Endpoint(SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092)
    config = Config({})
    assert _security(config, tmp_path, plaintext).tls_context(plaintext) is None
    assert https_options(config, "http://127.0.0.1:8081") == {}
    assert unused_listener_keys(config, ["PLAINTEXT"]) == []


# --- real clients --------------------------------------------------------------------------------


@dataclass
class SplitTlsNode:
    """``ssl.client.auth=required`` broker-wide, yet: the SASL_SSL listener (KIP-684), the PARTNER
    SSL listener (its own key says none) and the HTTPS registry (``http.ssl.client.auth=none``)
    take clients without a certificate."""

    process: BrokerProcess
    ca: TestCA
    ssl_port: int
    partner_port: int
    sasl_ssl_port: int
    registry: str


@pytest.fixture(scope="module")
def split_node(
    tmp_path_factory: pytest.TempPathFactory, ca: TestCA, server_cert: CertFiles
) -> Iterator[SplitTlsNode]:
    process = BrokerProcess(tmp_path_factory.mktemp("split-tls"))
    process.kafka_port, process.admin_port = free_port(), free_port()
    ssl_port, partner_port, sasl_ssl_port = free_port(), free_port(), free_port()
    registry = f"https://127.0.0.1:{free_port()}"
    process.overrides = {
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{process.kafka_port},SSL://127.0.0.1:{ssl_port},"
            f"PARTNER://127.0.0.1:{partner_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}"
        ),
        "listener.security.protocol.map": "PARTNER:SSL",
        "ssl.keystore.location": str(server_cert.combined),
        "ssl.truststore.location": str(ca.cert),
        "ssl.client.auth": "required",
        "listener.name.partner.ssl.client.auth": "none",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "schema.registry.listener": registry,
        "http.ssl.client.auth": "none",
        "authentication.method": "BASIC",
        "http.readwrite.users": "carol",
    }
    process.start()
    try:
        create_scram_users(process.bootstrap, SCRAM_USERS, ("SCRAM-SHA-512",))
        yield SplitTlsNode(process, ca, ssl_port, partner_port, sasl_ssl_port, registry)
    finally:
        process.stop()


def _ssl_client(node: SplitTlsNode, certificate: CertFiles | None = None) -> dict[str, str]:
    config = {"security.protocol": "SSL", "ssl.ca.location": str(node.ca.cert)}
    if certificate is not None:
        config |= {
            "ssl.certificate.location": str(certificate.cert),
            "ssl.key.location": str(certificate.key),
        }
    return config


@pytest.mark.integration
def test_the_ssl_listener_still_requires_a_client_certificate(split_node: SplitTlsNode) -> None:
    bootstrap = f"127.0.0.1:{split_node.ssl_port}"
    reported: list[str] = []
    anonymous = {
        "bootstrap.servers": bootstrap,
        **_ssl_client(split_node),
        "error_cb": lambda err: reported.append(str(err)),
    }
    assert_refused(anonymous, reported)
    round_trip(bootstrap, _ssl_client(split_node, split_node.ca.issue("split-app")))


@pytest.mark.integration
def test_a_scram_client_without_a_certificate_logs_in_on_sasl_ssl(split_node: SplitTlsNode) -> None:
    config = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(split_node.ca.cert),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "carol",
        "sasl.password": SCRAM_USERS["carol"],
    }
    round_trip(f"127.0.0.1:{split_node.sasl_ssl_port}", config)


@pytest.mark.integration
def test_an_ssl_listener_with_its_own_client_auth_takes_clients_without_a_certificate(
    split_node: SplitTlsNode,
) -> None:
    round_trip(f"127.0.0.1:{split_node.partner_port}", _ssl_client(split_node))


@pytest.mark.integration
def test_the_https_registry_takes_basic_auth_without_a_client_certificate(split_node: SplitTlsNode) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient(
        {
            "url": split_node.registry,
            "ssl.ca.location": str(split_node.ca.cert),
            "basic.auth.user.info": f"carol:{SCRAM_USERS['carol']}",
        }
    )
    schema = Schema('{"type": "record", "name": "S", "fields": [{"name": "a", "type": "int"}]}', "AVRO")
    schema_id = client.register_schema("split-value", schema)
    assert client.get_schema(schema_id).schema_type == "AVRO"
    trust = ssl.create_default_context(cafile=str(split_node.ca.cert))
    anonymous = httpx.get(f"{split_node.registry}/subjects", verify=trust)
    assert anonymous.status_code == 401  # the TLS handshake went through; Basic auth is what is missing
