"""SCRAM-SHA-256/512: the server exchange against an RFC 5802 client, the credential APIs, and real
clients (confluent-kafka, kafka-python, kcat) logging in with credentials stored in the database."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import shutil
import subprocess
import uuid

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.security.sasl import SaslServer, SaslState, check_plain_password, scram_failed
from tabletopic.broker.security.scram import (
    SCRAM_MECHANISMS,
    SCRAM_SHA_256,
    ScramCredential,
    ScramFailure,
    ScramServerExchange,
)
from tests.support.kafka_clients import assert_refused
from tests.support.secure_brokers import SCRAM_USERS, SecureBroker, round_trip, sasl_login


class ScramClient:
    """The client side of RFC 5802, written from the RFC independently of the server code."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.hash = SCRAM_MECHANISMS[mechanism].hash_name
        self.user, self.password = user, password
        self.nonce = base64.b64encode(uuid.uuid4().bytes).decode()

    def first(self) -> bytes:
        self.bare = f"n={self.user},r={self.nonce}"
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={fields['r']}"
        self.auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored, self.auth_message, self.hash).digest()
        self.server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        expected = hmac.new(self.server_key, self.auth_message, self.hash).digest()
        return server_final.decode() == f"v={base64.b64encode(expected).decode()}"


CREDENTIALS = {
    (user, m): ScramCredential.from_password(SCRAM_MECHANISMS[m], password)
    for user, password in {"alice": "pw"}.items()
    for m in SCRAM_MECHANISMS
}


def server(reauth_ms: int = 0, clock: list[float] | None = None) -> SaslServer:
    now = clock if clock is not None else [0.0]
    return SaslServer(
        ["PLAIN", *SCRAM_MECHANISMS],
        check_plain_password({}),
        lambda user, mechanism: CREDENTIALS.get((user, mechanism)),
        reauth_ms,
        clock=lambda: now[0],
    )


@pytest.mark.parametrize("mechanism", list(SCRAM_MECHANISMS))
def test_scram_exchange_authenticates_and_proves_the_server(mechanism: str) -> None:
    sasl, client = server(), ScramClient(mechanism, "alice", "pw")
    assert sasl.handshake(mechanism, 1) is ErrorCode.none
    first = sasl.authenticate(client.first())
    assert first.error_code is ErrorCode.none and not first.complete
    final = sasl.authenticate(client.final(first.challenge))
    assert final.error_code is ErrorCode.none and final.complete
    assert client.verify(final.challenge)
    assert sasl.principal == "User:alice" and sasl.allows(0)


@pytest.mark.parametrize("mechanism", list(SCRAM_MECHANISMS))
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "pw")])
def test_scram_failure_answers_kafkas_message(mechanism: str, user: str, password: str) -> None:
    sasl, client = server(), ScramClient(mechanism, user, password)
    sasl.handshake(mechanism, 1)
    first = sasl.authenticate(client.first())
    # An unknown user still gets a salt: names cannot be probed before the proof.
    assert first.error_code is ErrorCode.none and b"s=" in first.challenge
    final = sasl.authenticate(client.final(first.challenge))
    assert final.error_code is ErrorCode.sasl_authentication_failed
    assert final.message == scram_failed(mechanism)
    assert sasl.state is SaslState.FAILED and not sasl.allows(0)


@pytest.mark.parametrize(
    "token",
    [b"", b"\xff\xfe", b"garbage", b"p=tls-unique,,n=alice,r=x", b"n,,n=alice", b"n,,r=abc", b"n,,n=a=b,r=x"],
)
def test_scram_garbage_first_messages_fail_cleanly(token: bytes) -> None:
    sasl = server()
    sasl.handshake("SCRAM-SHA-256", 1)
    result = sasl.authenticate(token)
    assert result.error_code is ErrorCode.sasl_authentication_failed
    assert result.message == scram_failed("SCRAM-SHA-256")


@pytest.mark.parametrize(
    "final",
    [b"", b"c=biws,r=wrong,p=AAAA", b"c=eD0=,r={r},p=AAAA", b"c=biws,r={r},p=!!", b"c=biws,r={r},p=AAAA"],
)
def test_scram_garbage_final_messages_fail_cleanly(final: bytes) -> None:
    sasl, client = server(), ScramClient("SCRAM-SHA-256", "alice", "pw")
    sasl.handshake("SCRAM-SHA-256", 1)
    first = sasl.authenticate(client.first()).challenge
    nonce = dict(p.split("=", 1) for p in first.decode().split(","))["r"]
    result = sasl.authenticate(final.replace(b"{r}", nonce.encode()))
    assert result.error_code is ErrorCode.sasl_authentication_failed


def test_exchange_rejects_unknown_user_only_at_the_proof() -> None:
    exchange = ScramServerExchange(SCRAM_SHA_256, lambda user, mechanism: None)
    client = ScramClient("SCRAM-SHA-256", "nobody", "pw")
    challenge = exchange.first(client.first())
    with pytest.raises(ScramFailure):
        exchange.final(client.final(challenge))


def test_plain_accepts_a_password_that_derives_the_scram_credential() -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_256, "s3cret")
    assert credential.verifies("s3cret") and not credential.verifies("other")


def login(sasl: SaslServer, user: str, password: str, mechanism: str = "SCRAM-SHA-256"):  # type: ignore[no-untyped-def]
    client = ScramClient(mechanism, user, password)
    assert sasl.handshake(mechanism, 1) is ErrorCode.none
    return sasl.authenticate(client.final(sasl.authenticate(client.first()).challenge))


def test_session_expires_and_reauthentication_renews_it() -> None:
    clock = [100.0]
    sasl = server(reauth_ms=1000, clock=clock)
    assert login(sasl, "alice", "pw").session_lifetime_ms == 1000
    assert sasl.allows(0)
    clock[0] += 1.5
    assert sasl.session_expired and not sasl.allows(0) and sasl.allows(17)
    assert login(sasl, "alice", "pw").complete
    assert sasl.allows(0) and not sasl.session_expired


def test_reauthentication_as_another_principal_fails() -> None:
    global CREDENTIALS
    sasl = server(reauth_ms=60_000)
    login(sasl, "alice", "pw")
    CREDENTIALS[("bob", "SCRAM-SHA-256")] = ScramCredential.from_password(SCRAM_SHA_256, "bob-pw")
    try:
        result = login(sasl, "bob", "bob-pw")
    finally:
        del CREDENTIALS[("bob", "SCRAM-SHA-256")]
    assert result.error_code is ErrorCode.sasl_authentication_failed
    assert "Cannot change principals" in (result.message or "")


def test_without_reauth_a_second_handshake_is_illegal() -> None:
    sasl = server()
    login(sasl, "alice", "pw")
    assert sasl.handshake("SCRAM-SHA-256", 1) is ErrorCode.illegal_sasl_state


# --- real clients --------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_logs_in_with_scram(secure_broker: SecureBroker, mechanism: str) -> None:
    round_trip(secure_broker.sasl_plaintext, sasl_login(mechanism, "carol", SCRAM_USERS["carol"]))


@pytest.mark.integration
def test_plain_accepts_a_scram_users_password(secure_broker: SecureBroker) -> None:
    round_trip(secure_broker.sasl_plaintext, sasl_login("PLAIN", "dave", SCRAM_USERS["dave"]))


@pytest.mark.integration
@pytest.mark.parametrize(
    ("mechanism", "expected"),
    [
        ("PLAIN", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-256", scram_failed("SCRAM-SHA-256")),
        ("SCRAM-SHA-512", scram_failed("SCRAM-SHA-512")),
    ],
)
def test_wrong_password_is_answered_with_kafkas_error_for_every_mechanism(
    secure_broker: SecureBroker, mechanism: str, expected: str
) -> None:
    reported: list[str] = []
    config = {
        "bootstrap.servers": secure_broker.sasl_plaintext,
        **sasl_login(mechanism, "carol", "not-the-password"),
        "error_cb": lambda err: reported.append(str(err)),
    }
    # librdkafka shows the broker's SaslAuthenticate error, not "Broker transport failure".
    assert_refused(config, reported, f"SASL authentication error: {expected}")


@pytest.mark.integration
def test_kafka_python_sees_sasl_authentication_failed(
    secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(
        bootstrap_servers=secure_broker.sasl_plaintext,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="carol",
        sasl_plain_password=SCRAM_USERS["carol"],
    )
    assert isinstance(admin.list_topics(), list)
    admin.close()
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaError) as raised:
        KafkaAdminClient(
            bootstrap_servers=secure_broker.sasl_plaintext,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="carol",
            sasl_plain_password="wrong",
            request_timeout_ms=10000,  # a loaded machine can hold the answer back for seconds
            bootstrap_timeout_ms=8000,  # it retries a failed login until then (default 30 s)
        )
    assert scram_failed("SCRAM-SHA-512") in caplog.text + str(raised.value), (caplog.text, raised.value)
    # Every attempt sees the error, none a dropped connection: the close waits behind the answer.
    assert "socket disconnected" not in caplog.text, caplog.text


@pytest.mark.integration
def test_describe_user_scram_credentials_lists_mechanisms_not_secrets(secure_broker: SecureBroker) -> None:
    from confluent_kafka.admin import AdminClient, ScramMechanism  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": secure_broker.plaintext})
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    infos = {(i.mechanism, i.iterations) for i in described.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)}
    missing = admin.describe_user_scram_credentials(["nobody"])
    with pytest.raises(Exception, match="does not exist"):
        missing["nobody"].result(30)


@pytest.mark.integration
def test_deleted_credential_can_no_longer_log_in(secure_broker: SecureBroker) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramMechanism,
        UserScramCredentialDeletion,
    )

    from tests.support.secure_brokers import create_scram_users

    create_scram_users(secure_broker.plaintext, {"erin": "erin-pw"}, ("SCRAM-SHA-256",))
    round_trip(secure_broker.sasl_plaintext, sasl_login("SCRAM-SHA-256", "erin", "erin-pw"))
    admin = AdminClient({"bootstrap.servers": secure_broker.plaintext})
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)])[
        "erin"
    ].result(30)
    with pytest.raises(Exception, match="does not exist"):
        admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)]
        )["erin"].result(30)
    from confluent_kafka import Producer

    refused: list[object] = []
    producer = Producer(
        {"bootstrap.servers": secure_broker.sasl_plaintext, **sasl_login("SCRAM-SHA-256", "erin", "erin-pw")}
        | {"message.timeout.ms": "3000", "error_cb": refused.append}
    )
    producer.produce(
        f"sec-{uuid.uuid4().hex[:8]}", b"refused", on_delivery=lambda err, _msg: refused.append(err)
    )
    producer.flush(15)
    assert any("Authentication failed" in str(e) for e in refused), refused


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_produces_and_consumes_with_scram(secure_broker: SecureBroker) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    auth = [
        "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-512",
        "-X", "sasl.username=carol", "-X", f"sasl.password={SCRAM_USERS['carol']}",
    ]  # fmt: skip
    base = ["kcat", "-b", secure_broker.sasl_plaintext, *auth, "-t", topic]
    subprocess.run([*base, "-P"], input=b"from kcat\n", check=True, timeout=30)
    out = subprocess.run([*base, "-C", "-o", "beginning", "-c", "1", "-e"], capture_output=True, timeout=30)
    assert out.stdout.strip() == b"from kcat", out.stderr
