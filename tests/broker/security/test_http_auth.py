"""The HTTP services behind TLS and authentication: the Confluent schema-registry client, pyiceberg
(through the catalog's OAuth2 client-credentials flow) and the admin API, with read-only and
read-write users and 401/403 answers in each protocol's shape."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tabletopic.http_auth import (
    ADMIN_API,
    ICEBERG_REST,
    SCHEMA_REGISTRY,
    HttpAuthenticator,
    Tokens,
)
from tests.support.broker_process import BrokerProcess
from tests.support.ports import free_port
from tests.support.tls_certs import TestCA
from tests.support.waiting import wait_until_sync


def _authenticator() -> HttpAuthenticator:
    users = {"writer": "w-pw", "reader": "r-pw"}
    return HttpAuthenticator(lambda u, p: users.get(u) == p, {"writer"}, "test", Tokens(b"k" * 32, 60))


def test_basic_and_bearer_identify_users_with_their_roles() -> None:
    auth = _authenticator()
    basic = "Basic " + base64.b64encode(b"reader:r-pw").decode()
    assert auth.identify(basic) == ("reader", "read")
    assert auth.identify("Basic " + base64.b64encode(b"reader:nope").decode()) is None
    assert auth.identify("Basic !!!") is None
    token = auth.tokens.issue("writer", "write")
    assert auth.identify(f"Bearer {token}") == ("writer", "write")
    assert auth.identify(f"Bearer {token[:-2]}xx") is None
    assert auth.identify(None) is None


def test_expired_tokens_are_refused() -> None:
    now = [1000.0]
    tokens = Tokens(b"k" * 32, 60, clock=lambda: now[0])
    token = tokens.issue("writer", "write")
    now[0] += 61
    assert tokens.verify(token) is None


def test_which_requests_write() -> None:
    assert not SCHEMA_REGISTRY.is_write("POST", "/subjects/orders-value")  # lookup
    assert not SCHEMA_REGISTRY.is_write("POST", "/compatibility/subjects/x/versions/latest")
    assert SCHEMA_REGISTRY.is_write("POST", "/subjects/orders-value/versions")
    assert ICEBERG_REST.is_write("POST", "/v1/namespaces")
    assert not ICEBERG_REST.is_write("GET", "/v1/namespaces")
    assert not ICEBERG_REST.is_write("POST", "/v1/namespaces/ns/tables/t/metrics")  # a scan report
    assert ICEBERG_REST.is_write("POST", "/v1/namespaces/ns/tables/metrics")  # updateTable of `metrics`
    assert ICEBERG_REST.is_write("POST", "/v1/namespaces/ns/tables//metrics")
    assert ICEBERG_REST.is_write("POST", "/v1/x/namespaces/ns/tables/t/metrics")
    assert ADMIN_API.is_write("DELETE", "/v1/topics/x")


def test_wrong_basic_passwords_back_off_per_client_and_user() -> None:
    now = [1000.0]
    checked: list[str] = []

    def check(user: str, password: str) -> bool:
        checked.append(password)
        return password == "right"

    auth = HttpAuthenticator(check, set(), "test", Tokens(b"k" * 32, 60), clock=lambda: now[0])
    for _ in range(4):  # three free failures, the fourth starts a 1 s back-off
        assert not auth.login("alice", "wrong", "10.0.0.9")
    assert len(checked) == 4
    assert not auth.login("alice", "right", "10.0.0.9")  # refused unchecked while backing off
    assert len(checked) == 4
    assert auth.login("alice", "right", "10.0.0.1")  # another client is not held back
    now[0] += 1.01
    assert not auth.login("alice", "wrong", "10.0.0.9")  # fifth failure: 2 s
    now[0] += 1.5
    assert not auth.login("alice", "right", "10.0.0.9")
    now[0] += 0.6
    assert auth.login("alice", "right", "10.0.0.9")  # a success clears the count
    assert not auth.login("alice", "wrong", "10.0.0.9")
    assert auth.login("alice", "right", "10.0.0.9")


def test_tokens_and_remembered_logins_end_when_the_password_changes_or_the_user_goes() -> None:
    now = [1000.0]
    passwords = {"alice": "one"}
    versions = {"alice": "v1"}
    auth = HttpAuthenticator(
        lambda u, p: passwords.get(u) == p,
        {"alice"},
        "test",
        Tokens(b"k" * 32, 3600),
        credential_version=versions.get,
        clock=lambda: now[0],
    )
    token = auth.tokens.issue("alice", "write", "v1")
    basic = "Basic " + base64.b64encode(b"alice:one").decode()
    assert auth.identify(f"Bearer {token}") == ("alice", "write")
    assert auth.identify(basic) == ("alice", "write")
    passwords["alice"], versions["alice"] = "two", "v2"
    now[0] += 2.5  # past the credential version's cache
    assert auth.identify(f"Bearer {token}") is None
    assert auth.identify(basic) is None  # the remembered success of the old password is gone
    fresh = auth.tokens.issue("alice", "write", "v2")
    assert auth.identify(f"Bearer {fresh}") == ("alice", "write")
    del versions["alice"], passwords["alice"]
    now[0] += 2.5
    assert auth.identify(f"Bearer {fresh}") is None


@dataclass
class SecureHttpNode:
    process: BrokerProcess
    ca: TestCA
    registry: str
    catalog: str
    admin: str


@pytest.fixture(scope="module")
def http_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureHttpNode]:
    root = tmp_path_factory.mktemp("http-auth")
    ca = TestCA(root / "ca")
    server = ca.issue("localhost", server=True)
    registry, catalog, admin = (f"https://127.0.0.1:{free_port()}" for _ in range(3))
    process = BrokerProcess(
        root / "data",
        overrides={
            "sasl.plain.users": "writer:w-pw,reader:r-pw",
            "authentication.method": "BASIC",
            "http.readwrite.users": "writer",
            "ssl.keystore.location": str(server.combined),
            "schema.registry.listener": registry,
            "catalog.listener": catalog,
            "admin.listener": admin,
        },
    )
    process.start()
    yield SecureHttpNode(process, ca, registry, catalog, admin)
    process.stop()


@pytest.mark.integration
def test_schema_registry_client_with_basic_auth_over_tls(http_node: SecureHttpNode) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    schema = Schema('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}', "AVRO")
    common = {"url": http_node.registry, "ssl.ca.location": str(http_node.ca.cert)}
    writer = SchemaRegistryClient({**common, "basic.auth.user.info": "writer:w-pw"})
    schema_id = writer.register_schema("auth-value", schema)
    reader = SchemaRegistryClient({**common, "basic.auth.user.info": "reader:r-pw"})
    assert json.loads(reader.get_schema(schema_id).schema_str) == json.loads(schema.schema_str)
    with pytest.raises(SchemaRegistryError) as forbidden:
        reader.register_schema("auth-other-value", schema)
    assert forbidden.value.http_status_code == 403 and forbidden.value.error_code == 40301
    stranger = SchemaRegistryClient({**common, "basic.auth.user.info": "writer:wrong"})
    with pytest.raises(SchemaRegistryError) as unauthorized:
        stranger.get_subjects()
    assert unauthorized.value.http_status_code == 401 and unauthorized.value.error_code == 40101


@pytest.mark.integration
def test_pyiceberg_gets_a_token_with_credential(
    http_node: SecureHttpNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import ForbiddenError, OAuthError

    # requests lets these variables override a session's own CA bundle (pyiceberg's ssl.cabundle).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)

    ssl = {"cabundle": str(http_node.ca.cert)}
    writer = RestCatalog("w", uri=http_node.catalog, credential="writer:w-pw", ssl=ssl)
    writer.create_namespace("secured")
    reader = RestCatalog("r", uri=http_node.catalog, credential="reader:r-pw", ssl=ssl)
    assert ("secured",) in reader.list_namespaces()
    with pytest.raises(ForbiddenError):
        reader.create_namespace("not_allowed")
    with pytest.raises(OAuthError):
        RestCatalog("x", uri=http_node.catalog, credential="writer:wrong", ssl=ssl)


@pytest.mark.integration
def test_catalog_refuses_anonymous_requests_in_the_iceberg_error_shape(http_node: SecureHttpNode) -> None:
    answer = httpx.get(f"{http_node.catalog}/v1/namespaces", verify=str(http_node.ca.cert))
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "NotAuthorizedException"


@pytest.mark.integration
def test_admin_api_roles_and_open_health(http_node: SecureHttpNode) -> None:
    verify = str(http_node.ca.cert)
    assert httpx.get(f"{http_node.admin}/health", verify=verify).status_code == 200
    assert httpx.get(f"{http_node.admin}/v1/topics", verify=verify).status_code == 401
    assert (
        httpx.get(f"{http_node.admin}/v1/topics", verify=verify, auth=("reader", "r-pw")).status_code == 200
    )
    denied = httpx.delete(f"{http_node.admin}/v1/topics/none", verify=verify, auth=("reader", "r-pw"))
    assert denied.status_code == 403 and "read-only" in denied.json()["detail"]


@pytest.mark.integration
def test_a_bearer_token_ends_when_its_users_password_changes(http_node: SecureHttpNode) -> None:
    from tests.support.secure_brokers import create_scram_users

    verify = str(http_node.ca.cert)
    create_scram_users(http_node.process.bootstrap, {"erin": "first"}, ("SCRAM-SHA-256",))
    form = {"grant_type": "client_credentials", "client_id": "erin", "client_secret": "first"}
    answer = httpx.post(f"{http_node.catalog}/v1/oauth/tokens", data=form, verify=verify)
    assert answer.status_code == 200, answer.text
    bearer = {"Authorization": f"Bearer {answer.json()['access_token']}"}
    assert httpx.get(f"{http_node.admin}/v1/topics", headers=bearer, verify=verify).status_code == 200
    create_scram_users(http_node.process.bootstrap, {"erin": "second"}, ("SCRAM-SHA-256",))
    wait_until_sync(  # else the token outlived the password change
        lambda: httpx.get(f"{http_node.admin}/v1/topics", headers=bearer, verify=verify).status_code == 401,
        timeout=10,
        interval=0.2,
    )
    assert httpx.get(f"{http_node.catalog}/v1/namespaces", headers=bearer, verify=verify).status_code == 401


@pytest.mark.integration
def test_client_commands_log_in_as_the_http_user_of_their_environment(
    http_node: SecureHttpNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tabletopic tables``/``groups`` (the admin API) and ``sql`` (its ``/v1/sql``) send
    ``TABLETOPIC_HTTP_USER``/``TABLETOPIC_HTTP_PASSWORD``. Without them a guarded node was answered
    with a bare "Unauthorized", and ``sql`` started a Spark of its own on another catalog instead."""
    from typer.testing import CliRunner

    from tabletopic.cli import app

    monkeypatch.delenv("TABLETOPIC_HTTP_USER", raising=False)
    monkeypatch.delenv("TABLETOPIC_HTTP_PASSWORD", raising=False)
    admin = ["--admin-url", http_node.admin]
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    untrusted = CliRunner().invoke(app, ["tables", *admin, "list"])  # the test CA is nobody's
    assert untrusted.exit_code == 1, untrusted.output
    assert "set SSL_CERT_FILE to the CA file" in untrusted.stderr, untrusted.stderr
    monkeypatch.setenv("SSL_CERT_FILE", str(http_node.ca.cert))  # httpx trusts the test CA

    for command in (["tables", *admin, "list"], ["groups", *admin, "list"], ["sql", *admin, "SELECT 1"]):
        refused = CliRunner().invoke(app, command)
        assert refused.exit_code == 1, (command, refused.output)
        assert "asks for a login (authentication.method=BASIC)" in refused.stderr, refused.stderr
        assert "TABLETOPIC_HTTP_USER" in refused.stderr and "TABLETOPIC_HTTP_PASSWORD" in refused.stderr

    monkeypatch.setenv("TABLETOPIC_HTTP_USER", "reader")
    monkeypatch.setenv("TABLETOPIC_HTTP_PASSWORD", "r-pw")
    listed = CliRunner().invoke(app, ["groups", *admin, "list"])
    assert listed.exit_code == 0, listed.output

    monkeypatch.setenv("TABLETOPIC_HTTP_PASSWORD", "wrong")
    wrong = CliRunner().invoke(app, ["tables", *admin, "list"])
    assert wrong.exit_code == 1 and "refused the login as reader" in wrong.stderr, wrong.output


@pytest.mark.integration
def test_operations_commands_read_a_guarded_catalog_as_the_http_user(
    http_node: SecureHttpNode, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``tabletopic sql -e duckdb`` and the ``tables`` operations open the node's catalog. A 401 read
    as "no catalog server": they opened the metadata database of their own data directory instead,
    which outside the node's (a ``cluster up`` directory) held no tables at all."""
    from contextlib import ExitStack

    import typer
    from pyiceberg.catalog.rest import RestCatalog

    from tabletopic.config import Config
    from tabletopic.table.ops.access import open_catalog

    monkeypatch.setenv("SSL_CERT_FILE", str(http_node.ca.cert))  # httpx
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(http_node.ca.cert))  # pyiceberg's requests
    ssl = {"cabundle": str(http_node.ca.cert)}
    RestCatalog("w", uri=http_node.catalog, credential="writer:w-pw", ssl=ssl).create_namespace("ops_seen")
    cfg = Config({"data.dir": str(tmp_path), "catalog.listener": http_node.catalog})

    monkeypatch.setenv("TABLETOPIC_HTTP_USER", "reader")
    monkeypatch.setenv("TABLETOPIC_HTTP_PASSWORD", "r-pw")
    with ExitStack() as stack:
        catalog = open_catalog(cfg, stack)
        assert isinstance(catalog, RestCatalog) and ("ops_seen",) in catalog.list_namespaces()

    monkeypatch.setenv("TABLETOPIC_HTTP_PASSWORD", "wrong")
    with ExitStack() as stack, pytest.raises(typer.Exit):
        open_catalog(cfg, stack)

    monkeypatch.delenv("TABLETOPIC_HTTP_USER")
    with ExitStack() as stack:  # no login: the metadata database, as before (said on stderr)
        assert not isinstance(open_catalog(cfg, stack), RestCatalog)
