"""SASL/PLAIN as a small sans-IO state machine (h11 style): the connection feeds it handshake and
token events and sends what it returns; it never touches a socket.

Kafka has two framings: SaslHandshake v0 is followed by raw length-prefixed tokens outside the
Kafka protocol, v1 by SaslAuthenticate requests carrying the tokens. Both end in AUTHENTICATED or
FAILED; only ApiVersions and the SASL requests are allowed before that.
"""

from __future__ import annotations

import enum
import hmac
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

MECHANISMS = ("PLAIN",)
PRE_AUTH_API_KEYS = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate


class SaslState(enum.Enum):
    AWAIT_HANDSHAKE = "await-handshake"
    AWAIT_RAW_TOKEN = "await-raw-token"  # after a v0 handshake
    AWAIT_AUTHENTICATE = "await-authenticate"  # after a v1 handshake
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class AuthResult:
    error_code: ErrorCode
    message: str | None = None
    principal: str | None = None


def parse_users(entries: list[str]) -> dict[str, str]:
    """``["alice:secret", ...]`` -> ``{"alice": "secret"}``. Raises ValueError on a bad entry."""
    users = {}
    for entry in entries:
        name, sep, password = entry.partition(":")
        if not sep or not name:
            raise ValueError(f"sasl.plain.users entry {entry!r} must be user:password")
        users[name] = password
    return users


class SaslPlainServer:
    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.state = SaslState.AWAIT_HANDSHAKE
        self.principal: str | None = None

    def allows(self, api_key: int) -> bool:
        """Whether a request of this API may be served in the current state."""
        return self.state is SaslState.AUTHENTICATED or api_key in PRE_AUTH_API_KEYS

    @property
    def expects_raw_token(self) -> bool:
        return self.state is SaslState.AWAIT_RAW_TOKEN

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        if self.state is not SaslState.AWAIT_HANDSHAKE:
            self.state = SaslState.FAILED
            return ErrorCode.illegal_sasl_state
        if mechanism not in MECHANISMS:
            return ErrorCode.unsupported_sasl_mechanism
        self.state = SaslState.AWAIT_RAW_TOKEN if version == 0 else SaslState.AWAIT_AUTHENTICATE
        return ErrorCode.none

    def authenticate(self, token: bytes) -> AuthResult:
        """Check a PLAIN token (``authzid NUL authcid NUL password``)."""
        if self.state not in (SaslState.AWAIT_RAW_TOKEN, SaslState.AWAIT_AUTHENTICATE):
            self.state = SaslState.FAILED
            return AuthResult(ErrorCode.illegal_sasl_state, "SaslAuthenticate before SaslHandshake")
        parts = bytes(token).split(b"\0")
        if len(parts) != 3:
            self.state = SaslState.FAILED
            return AuthResult(ErrorCode.sasl_authentication_failed, "malformed PLAIN token")
        authzid, user_bytes, password_bytes = parts
        try:
            user, password = user_bytes.decode(), password_bytes.decode()
        except UnicodeDecodeError:
            self.state = SaslState.FAILED
            return AuthResult(ErrorCode.sasl_authentication_failed, "malformed PLAIN token")
        expected = self._users.get(user)
        # Compare in constant time; an unknown user costs the same as a wrong password.
        ok = (
            hmac.compare_digest((expected or "\0invalid").encode(), password.encode())
            and expected is not None
        )
        if not ok or (authzid and authzid.decode(errors="replace") != user):
            self.state = SaslState.FAILED
            return AuthResult(ErrorCode.sasl_authentication_failed, "invalid username or password")
        self.state = SaslState.AUTHENTICATED
        self.principal = f"User:{user}"
        return AuthResult(ErrorCode.none, principal=self.principal)
