"""SCRAM (RFC 5802, RFC 7677) as Kafka uses it: the credential math and the server side of one
exchange as a sans-IO object (bytes in, bytes out, no I/O).

Kafka stores, per user and mechanism, the salt, the iteration count, StoredKey and ServerKey;
AlterUserScramCredentials sends the salted password computed by the client, so the broker never
sees the password itself.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Protocol

MIN_ITERATIONS = 4096  # Kafka refuses fewer (ScramMechanism.minIterations)
MAX_ITERATIONS = 16384  # and more (UNACCEPTABLE_CREDENTIAL)
SALT_BYTES = 64  # librdkafka's AlterUserScramCredentials salt, and the made-up salt of an unknown user


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str
    # The int8 AlterUserScramCredentials / DescribeUserScramCredentials use on the wire.
    wire_type: int

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
SCRAM_MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_WIRE_TYPE = {m.wire_type: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps of a password: enough to verify a proof, not to recover it."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, iterations: int, salted_password: bytes
    ) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(
            mechanism.name,
            salt,
            iterations,
            mechanism.digest(client_key),
            mechanism.hmac(salted_password, b"Server Key"),
        )

    @classmethod
    def from_password(
        cls,
        mechanism: ScramMechanism,
        password: str,
        iterations: int = MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
        salted = mechanism.salted_password(password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, iterations, salted)

    def verifies(self, password: str) -> bool:
        """Whether ``password`` derives this credential (SASL/PLAIN against a SCRAM credential)."""
        mechanism = SCRAM_MECHANISMS[self.mechanism]
        salted = mechanism.salted_password(password, self.salt, self.iterations)
        client_key = mechanism.hmac(salted, b"Client Key")
        return hmac.compare_digest(mechanism.digest(client_key), self.stored_key)


class CredentialLookup(Protocol):
    def __call__(self, user: str, mechanism: str) -> ScramCredential | None: ...


class ScramFailure(Exception):
    """The exchange failed; the message is for the server log, never for the client."""


def _utf8(token: bytes, message: str) -> str:
    try:
        return token.decode()
    except UnicodeDecodeError:
        raise ScramFailure(f"{message} message is not UTF-8") from None


def _attributes(message: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramFailure(f"malformed SCRAM attribute {part[:40]!r}")
        result.setdefault(key, value)
    return result


def _unescape_name(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma and ``=3D`` an equals sign; any other ``=`` is invalid."""
    out = name.replace("=2C", ",").replace("=3D", "=")
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramFailure("invalid escape in SCRAM user name")
    return out


class ScramServerExchange:
    """One SCRAM exchange: ``first(client-first) -> server-first``, then
    ``final(client-final) -> server-final``; either raises :class:`ScramFailure`.

    An unknown user gets a made-up salt derived from a per-process secret, so the exchange fails
    only at the proof and user names cannot be probed: as long as a real one (``SALT_BYTES``, what
    librdkafka and ``tabletopic users add`` generate), the same for the same name on every attempt,
    different per mechanism as a real user's are, with the default iteration count.
    """

    _fake_salt_key = secrets.token_bytes(64)

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._nonce = ""
        self.user: str | None = None

    def first(self, token: bytes) -> bytes:
        text = _utf8(token, "client-first")
        cbind, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or cbind not in ("n", "y"):
            raise ScramFailure("client-first message has no valid GS2 header (channel binding unsupported)")
        attributes = _attributes(bare)
        if "m" in attributes:
            raise ScramFailure("mandatory SCRAM extension not supported")
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise ScramFailure("client-first message lacks a user name or nonce")
        user = _unescape_name(attributes["n"])
        if authzid and authzid != f"a={attributes['n']}":
            raise ScramFailure("authorization id differs from the user name")
        if attributes.get("tokenauth") == "true":
            raise ScramFailure("delegation tokens are not supported")
        self.user = user
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._credential = self._lookup(user, self._mechanism.name)
        if self._credential is not None:
            salt, iterations = self._credential.salt, self._credential.iterations
        else:
            probe = f"{self._mechanism.name}\x00{user}".encode()
            salt = hmac.new(self._fake_salt_key, probe, "sha512").digest()[:SALT_BYTES]
            iterations = MIN_ITERATIONS
        self._nonce = attributes["r"] + secrets.token_urlsafe(24)
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return self._server_first.encode()

    def final(self, token: bytes) -> bytes:
        text = _utf8(token, "client-final")
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramFailure("client-final message has no proof")
        attributes = _attributes(without_proof)
        if attributes.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise ScramFailure("channel binding data does not match the GS2 header")
        # Kafka only checks that the echoed nonce ends with the server's: older librdkafka (as in
        # Debian's kcat) sends the client nonce twice, and Kafka accepts it.
        if not attributes.get("r", "").endswith(self._nonce):
            raise ScramFailure("nonce does not match")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramFailure("proof is not base64") from None
        credential = self._credential
        if credential is None:
            raise ScramFailure(f"unknown user {self.user!r}")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = self._mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramFailure("proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self._mechanism.digest(client_key), credential.stored_key):
            raise ScramFailure(f"wrong password for user {self.user!r}")
        server_signature = self._mechanism.hmac(credential.server_key, auth_message)
        return f"v={base64.b64encode(server_signature).decode()}".encode()


class ScramClientExchange:
    """The client side of one exchange, for the broker's own requests to other brokers:
    ``first() -> client-first``, ``final(server-first) -> client-final``, then
    ``verify(server-final)``; a server that cannot prove it knows the credential raises
    :class:`ScramFailure`."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str) -> None:
        self._mechanism = mechanism
        self._password = password
        name = user.replace("=", "=3D").replace(",", "=2C")
        self._nonce = secrets.token_urlsafe(24)
        self._client_first_bare = f"n={name},r={self._nonce}"
        self._expected_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attributes = _attributes(text)
        nonce, salt, iterations = attributes.get("r", ""), attributes.get("s"), attributes.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise ScramFailure("server-first message lacks our nonce, a salt or an iteration count")
        if not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            raise ScramFailure(f"server asks for {iterations} iterations")
        salted = self._mechanism.salted_password(self._password, base64.b64decode(salt), int(iterations))
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = self._mechanism.hmac(salted, b"Client Key")
        signature = self._mechanism.hmac(self._mechanism.digest(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = self._mechanism.hmac(salted, b"Server Key")
        self._expected_signature = self._mechanism.hmac(server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attributes = _attributes(server_final.decode())
        if "e" in attributes:
            raise ScramFailure(f"server refused the proof: {attributes['e']}")
        signature = base64.b64decode(attributes.get("v", ""))
        if not hmac.compare_digest(signature, self._expected_signature):
            raise ScramFailure("server signature does not match: it does not hold our credential")
