"""SASL/OAUTHBEARER: JWTs validated against a JWKS file (signature, expiry, audience, issuer), the
principal from the sub claim, the token's expiry bounding the session (KIP-368), and refusals
answered as Kafka answers them — first the RFC 7628 error challenge, then SASL_AUTHENTICATION_FAILED."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from typer.testing import CliRunner

from tabletopic.broker.security.oauth_client import ClientCredentials
from tabletopic.broker.security.oauthbearer import INVALID_TOKEN, TokenValidator, parse_client_first
from tabletopic.broker.security.sasl import SaslServer
from tabletopic.cli import app
from tabletopic.config import Config, ConfigError
from tests.support.jwt_issuer import JwtIssuer, TokenEndpoint
from tests.support.kafka_clients import assert_refused
from tests.support.secure_brokers import NamedListenersBroker


def client_first(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> JwtIssuer:
    return JwtIssuer(tmp_path_factory.mktemp("issuer"))


def server(issuer: JwtIssuer, tmp_path: Path, reauth_ms: int = 0, **settings: str) -> SaslServer:
    config = Config({"data.dir": str(tmp_path), **issuer.server_settings(), **settings})
    sasl = SaslServer(
        ["OAUTHBEARER"], lambda u, p: False, lambda u, m: None, reauth_ms, oauth=TokenValidator(config)
    )
    assert sasl.handshake("OAUTHBEARER", 1) is ErrorCode.none
    return sasl


def test_valid_token_names_the_principal_and_bounds_the_session(issuer: JwtIssuer, tmp_path: Path) -> None:
    sasl = server(issuer, tmp_path, reauth_ms=3_600_000)
    result = sasl.authenticate(client_first(issuer.token("alice", lifetime_s=120)))
    assert result.error_code is ErrorCode.none and result.complete and result.challenge == b""
    assert sasl.principal == "User:alice"
    assert 100_000 < result.session_lifetime_ms <= 120_000  # the token's, shorter than the configured hour


def test_sub_claim_name_picks_the_principal(issuer: JwtIssuer, tmp_path: Path) -> None:
    sasl = server(issuer, tmp_path, **{"sasl.oauthbearer.sub.claim.name": "client_id"})
    assert sasl.authenticate(client_first(issuer.token("x", client_id="svc-billing"))).complete
    assert sasl.principal == "User:svc-billing"


@pytest.mark.parametrize(
    "claims",
    [
        {"lifetime_s": -120},  # expired beyond the 30 s skew
        {"aud": "someone-else"},
        {"iss": "https://evil.example.com"},
        {"sub": ""},
    ],
)
def test_refused_token_gets_the_error_challenge_then_fails(
    issuer: JwtIssuer, tmp_path: Path, claims: dict[str, Any]
) -> None:
    sasl = server(issuer, tmp_path)
    token = issuer.token(str(claims.pop("sub", "alice")), **claims)
    first = sasl.authenticate(client_first(token))
    assert first.error_code is ErrorCode.none and not first.complete
    assert first.challenge == INVALID_TOKEN.encode()
    final = sasl.authenticate(b"\x01")
    assert final.error_code is ErrorCode.sasl_authentication_failed
    assert final.message == INVALID_TOKEN and sasl.principal is None


def test_token_signed_by_another_key_or_garbled_is_refused(issuer: JwtIssuer, tmp_path: Path) -> None:
    stranger = JwtIssuer(tmp_path / "stranger", kid="test-key")
    for message in (client_first(stranger.token("alice")), client_first("not.a.jwt"), b"\xff\x00", b"n,,"):
        sasl = server(issuer, tmp_path)
        assert sasl.authenticate(message).challenge == INVALID_TOKEN.encode()
        assert sasl.authenticate(b"\x01").error_code is ErrorCode.sasl_authentication_failed


def test_reauthentication_needs_the_same_principal(issuer: JwtIssuer, tmp_path: Path) -> None:
    sasl = server(issuer, tmp_path)
    assert sasl.authenticate(client_first(issuer.token("alice", lifetime_s=60))).complete
    assert sasl.handshake("OAUTHBEARER", 1) is ErrorCode.none  # the token expires: re-auth allowed
    assert sasl.authenticate(client_first(issuer.token("alice", lifetime_s=600))).complete
    assert sasl.handshake("OAUTHBEARER", 1) is ErrorCode.none
    switched = sasl.authenticate(client_first(issuer.token("mallory")))
    assert switched.error_code is ErrorCode.sasl_authentication_failed


def test_client_first_message_parsing() -> None:
    assert parse_client_first(client_first("abc", authzid="alice")) == ("alice", "abc")
    assert parse_client_first(b"n,,\x01host=h\x01auth=Bearer t0k\x01\x01") == (None, "t0k")


def test_missing_or_remote_jwks_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    for url in (None, "https://issuer.example.com/jwks", (tmp_path / "absent.json").as_uri()):
        settings = {"data.dir": str(tmp_path)} | ({"sasl.oauthbearer.jwks.endpoint.url": url} if url else {})
        with pytest.raises(ConfigError, match=r"sasl\.oauthbearer\.jwks\.endpoint\.url"):
            TokenValidator(Config(settings))


def oauth_client(broker: NamedListenersBroker, token: Any, reported: list[str]) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.external,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        # librdkafka refuses an expiry in the past itself: tell it one ahead, whatever the JWT says.
        "oauth_cb": lambda _config: (token() if callable(token) else token, time.time() + 300),
        "error_cb": lambda err: reported.append(f"{err.name()} {err.str()}"),
    }


@pytest.mark.integration
def test_confluent_kafka_produces_and_consumes_with_a_signed_token(
    named_listeners_broker: NamedListenersBroker,
) -> None:
    from confluent_kafka import Consumer, Producer

    broker = named_listeners_broker
    reported: list[str] = []
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    config = oauth_client(broker, lambda: broker.issuer.token("svc-orders"), reported)
    producer = Producer({**config, "message.timeout.ms": 10000})
    producer.produce(topic, b"with a token")
    assert producer.flush(15) == 0, reported
    consumer = Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        message = None
        for _ in range(30):
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                break
        assert message is not None and message.value() == b"with a token", reported
    finally:
        consumer.close()


@pytest.mark.integration
@pytest.mark.parametrize("claims", [{"lifetime_s": -300}, {"aud": "not-tabletopic"}])
def test_confluent_kafka_is_told_sasl_authentication_failed_for_a_bad_token(
    named_listeners_broker: NamedListenersBroker, claims: dict[str, Any]
) -> None:
    reported: list[str] = []
    token = named_listeners_broker.issuer.token("svc-orders", **claims)
    assert_refused(oauth_client(named_listeners_broker, token, reported), reported, "invalid_token")


def _oidc_login(bootstrap: str, endpoint: TokenEndpoint, secret: str = "ops-secret") -> list[str]:
    """The options of a client command logging in with a token from ``endpoint``, in librdkafka's
    keys, as a ``--command-config`` file would hold them."""
    settings = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": endpoint.url,
        "sasl.oauthbearer.client.id": "ops-cli",
        "sasl.oauthbearer.client.secret": secret,
    }
    return ["-b", bootstrap, *(word for key, value in settings.items() for word in ("-X", f"{key}={value}"))]


@pytest.mark.integration
def test_client_commands_and_partitions_move_log_in_with_a_token_from_the_identity_provider(
    named_listeners_broker: NamedListenersBroker,
) -> None:
    """librdkafka fetches its own token for ``topics``; ``partitions move`` (the broker's wire
    client, as confluent-kafka has no AlterPartitionReassignments) and the login check every command
    runs first fetch theirs from the same settings."""
    broker = named_listeners_broker
    topic = f"oidc-{uuid.uuid4().hex[:8]}"
    with TokenEndpoint(broker.issuer, {"ops-cli": "ops-secret"}) as endpoint:
        login = _oidc_login(broker.external, endpoint)
        created = CliRunner().invoke(app, ["topics", "create", topic, "--partitions", "1", *login])
        assert created.exit_code == 0, created.output
        before = endpoint.requests
        moved = CliRunner().invoke(app, ["partitions", "move", topic, "0", "--to", "1", *login])
        assert moved.exit_code == 0 and f"{topic}-0 is led by broker 1" in moved.stdout, moved.output
        assert endpoint.requests - before == 2  # the login check's, then one for the kept connection


@pytest.mark.integration
def test_a_client_secret_the_identity_provider_refuses_is_named_at_once(
    named_listeners_broker: NamedListenersBroker,
) -> None:
    with TokenEndpoint(named_listeners_broker.issuer, {"ops-cli": "ops-secret"}) as endpoint:
        started = time.monotonic()
        login = _oidc_login(named_listeners_broker.external, endpoint, secret="wrong")
        listed = CliRunner().invoke(app, ["topics", "list", *login])
    assert listed.exit_code == 1 and time.monotonic() - started < 10, listed.output
    assert "answered 401: unknown client or wrong secret" in listed.output
    assert "sasl.oauthbearer.client.secret" in listed.output
    # librdkafka's default method signs nothing, so the broker would refuse its token: said at once.
    unsigned = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER"]
    refused = CliRunner().invoke(
        app, ["partitions", "move", "t", "0", "--to", "1", "-b", named_listeners_broker.external, *unsigned]
    )
    assert refused.exit_code == 2 and "sasl.oauthbearer.method=oidc" in refused.output, refused.output


def test_oauthbearer_without_oidc_settings_names_the_keys_to_set() -> None:
    with pytest.raises(ValueError, match=r"sasl\.oauthbearer\.method=oidc"):
        ClientCredentials.from_settings({"sasl.mechanism": "OAUTHBEARER"})
    needs = r"needs sasl\.oauthbearer\.client\.id, sasl\.oauthbearer\.client\.secret"
    with pytest.raises(ValueError, match=needs):
        ClientCredentials.from_settings(
            {"sasl.oauthbearer.method": "OIDC", "sasl.oauthbearer.token.endpoint.url": "http://idp/token"}
        )


@pytest.mark.integration
def test_a_token_the_broker_refuses_ends_partitions_move_with_its_challenge(
    named_listeners_broker: NamedListenersBroker, tmp_path: Path
) -> None:
    """Signed by a key the broker's JWKS lacks: the wire client acknowledges the RFC 7628 error
    challenge, as a client must, and the command ends with it."""
    stranger = JwtIssuer(tmp_path / "stranger")
    with TokenEndpoint(stranger, {"ops-cli": "ops-secret"}) as endpoint:
        login = _oidc_login(named_listeners_broker.external, endpoint)
        moved = CliRunner().invoke(app, ["partitions", "move", "t", "0", "--to", "1", *login])
    assert moved.exit_code == 1, moved.output
    assert 'login as ops-cli refused: {"status":"invalid_token"}' in moved.output, moved.output
