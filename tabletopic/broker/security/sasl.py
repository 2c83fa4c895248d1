"""SASL on a Kafka connection as a sans-IO state machine (h11 style): the connection feeds it the
handshake and each token and sends what it returns; it never touches a socket or a clock it was not
given.

Kafka has two framings: SaslHandshake v0 is followed by raw length-prefixed tokens outside the
Kafka protocol, v1 by SaslAuthenticate requests carrying the tokens. A failed v1 exchange is
answered with SASL_AUTHENTICATION_FAILED and Kafka's message before the connection closes (a v0
client can only be told by the close). Only ApiVersions and the SASL requests are allowed before
authentication, and again once the session (``connections.max.reauth.ms``, KIP-368) has expired
until the client re-authenticates as the same principal.
"""

from __future__ import annotations

import enum
import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from tabletopic.broker.security.oauthbearer import OAuthBearerExchange, TokenValidator
from tabletopic.broker.security.scram import (
    SCRAM_MECHANISMS,
    CredentialLookup,
    ScramFailure,
    ScramServerExchange,
)

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_API_KEYS = frozenset({17, 36})  # SaslHandshake, SaslAuthenticate
PRE_AUTH_API_KEYS = frozenset({17, 18, 36})  # ... and ApiVersions
# Kafka's own messages, so a user sees the same text as against Kafka.
PLAIN_FAILED = "Authentication failed: Invalid username or password"


def scram_failed(mechanism: str) -> str:
    return (
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


class SaslState(enum.Enum):
    AWAIT_HANDSHAKE = "await-handshake"
    AWAIT_RAW_TOKEN = "await-raw-token"  # after a v0 handshake
    AWAIT_AUTHENTICATE = "await-authenticate"  # after a v1 handshake
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class AuthResult:
    """The answer to one token.

    ``message`` goes to the client (Kafka's wording); ``detail`` only to the server log, so a
    client never learns whether the user or the password was wrong.
    """

    error_code: ErrorCode
    message: str | None = None
    challenge: bytes = b""
    complete: bool = False
    session_lifetime_ms: int = 0
    detail: str | None = None


class PasswordCheck(Protocol):
    def __call__(self, user: str, password: str) -> bool: ...


class _AuthFailure(Exception):
    def __init__(self, message: str, detail: str) -> None:
        super().__init__(detail)
        self.message = message
        self.detail = detail


class _Exchange(Protocol):
    def step(self, token: bytes) -> tuple[bytes, str | None]:
        """The next challenge, and the principal once the exchange is complete. Raises _AuthFailure."""
        ...


class _PlainExchange:
    def __init__(self, check: PasswordCheck) -> None:
        self._check = check

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise _AuthFailure(PLAIN_FAILED, "malformed PLAIN token")
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise _AuthFailure(PLAIN_FAILED, "PLAIN token is not UTF-8") from None
        if not user:
            raise _AuthFailure(PLAIN_FAILED, "PLAIN token without a user name")
        if authzid and authzid != user:
            raise _AuthFailure(
                "Authentication failed: Client requested an authorization id that is different from username",
                f"authorization id {authzid!r} differs from user {user!r}",
            )
        if not self._check(user, password):
            raise _AuthFailure(PLAIN_FAILED, f"wrong password or unknown user {user!r}")
        return b"", f"User:{user}"


class _ScramExchange:
    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self._mechanism = mechanism
        self._scram = ScramServerExchange(SCRAM_MECHANISMS[mechanism], lookup)
        self._first_done = False

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            if not self._first_done:
                self._first_done = True
                return self._scram.first(token), None
            return self._scram.final(token), f"User:{self._scram.user}"
        except ScramFailure as exc:
            raise _AuthFailure(scram_failed(self._mechanism), str(exc)) from None


def check_plain_password(users: dict[str, str]) -> PasswordCheck:
    """A PasswordCheck over ``sasl.plain.users``, comparing in constant time so an unknown user
    costs the same as a wrong password."""

    def check(user: str, password: str) -> bool:
        expected = users.get(user)
        same = hmac.compare_digest((expected or "\0invalid").encode(), password.encode())
        return same and expected is not None

    return check


class SaslServer:
    """The SASL side of one connection.

    Args:
        mechanisms: the enabled mechanisms (``sasl.enabled.mechanisms``), in the order advertised.
        plain_check: verifies a PLAIN user and password.
        scram_lookup: finds a user's SCRAM credential.
        reauth_ms: ``connections.max.reauth.ms``; 0 means sessions never expire (an OAUTHBEARER
            session still ends with its token).
        clock: monotonic seconds.
        oauth: validates OAUTHBEARER tokens (None: the mechanism is not offered).
        wall_clock: seconds since the epoch (token expiry times are wall-clock).
    """

    def __init__(
        self,
        mechanisms: Sequence[str],
        plain_check: PasswordCheck,
        scram_lookup: CredentialLookup,
        reauth_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
        oauth: TokenValidator | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.mechanisms = [m for m in mechanisms if m != "OAUTHBEARER" or oauth is not None]
        self._oauth = oauth
        self._wall_clock = wall_clock
        self._plain_check = plain_check
        self._scram_lookup = scram_lookup
        self._reauth_ms = reauth_ms
        self._clock = clock
        self.state = SaslState.AWAIT_HANDSHAKE
        self.principal: str | None = None
        self.mechanism: str | None = None
        self._exchange: _Exchange | None = None
        self._expires_at: float | None = None
        self._reauthenticating = False

    @property
    def expects_raw_token(self) -> bool:
        return self.state is SaslState.AWAIT_RAW_TOKEN

    @property
    def session_expired(self) -> bool:
        return self._expires_at is not None and self._clock() >= self._expires_at

    def allows(self, api_key: int) -> bool:
        """Whether a request of this API may be served now (else the connection is closed)."""
        if api_key in PRE_AUTH_API_KEYS:
            return True
        if self.principal is None or self.session_expired:
            return False
        return self.state is SaslState.AUTHENTICATED or self._reauthenticating

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        expiring = self._reauth_ms > 0 or self._expires_at is not None
        if self.state is SaslState.AUTHENTICATED and version >= 1 and expiring:
            # KIP-368 re-authentication: same mechanism, the old session stays valid meanwhile.
            if mechanism != self.mechanism:
                return ErrorCode.unsupported_sasl_mechanism
            self._reauthenticating = True
        elif self.state is not SaslState.AWAIT_HANDSHAKE:
            self.state = SaslState.FAILED
            return ErrorCode.illegal_sasl_state
        if mechanism not in self.mechanisms:
            return ErrorCode.unsupported_sasl_mechanism
        self.mechanism = mechanism
        self._exchange = self._new_exchange(mechanism)
        self.state = SaslState.AWAIT_RAW_TOKEN if version == 0 else SaslState.AWAIT_AUTHENTICATE
        return ErrorCode.none

    def _new_exchange(self, mechanism: str) -> _Exchange:
        if mechanism == "PLAIN":
            return _PlainExchange(self._plain_check)
        if mechanism == "OAUTHBEARER" and self._oauth is not None:
            return OAuthBearerExchange(self._oauth, _AuthFailure)
        return _ScramExchange(mechanism, self._scram_lookup)

    def authenticate(self, token: bytes) -> AuthResult:
        """Feed one client token; the result says what to answer."""
        waiting = self.state in (SaslState.AWAIT_RAW_TOKEN, SaslState.AWAIT_AUTHENTICATE)
        if self._exchange is None or not waiting:
            self.state = SaslState.FAILED
            return AuthResult(
                ErrorCode.illegal_sasl_state,
                "Unexpected SaslAuthenticate request before SaslHandshake",
                detail="SaslAuthenticate before SaslHandshake",
            )
        try:
            challenge, principal = self._exchange.step(bytes(token))
        except _AuthFailure as failure:
            return self._fail(failure.message, failure.detail)
        if principal is None:
            return AuthResult(ErrorCode.none, challenge=challenge)
        if self._reauthenticating and principal != self.principal:
            return self._fail(
                f"Cannot change principals during re-authentication from {self.principal}: {principal}",
                f"re-authentication as {principal} instead of {self.principal}",
            )
        lifetime = self._reauth_ms
        expires_ms = getattr(self._exchange, "expires_ms", None)
        if expires_ms is not None:
            # KIP-368: a credential that expires bounds the session, whatever the configured limit.
            left = max(1, expires_ms - int(self._wall_clock() * 1000))
            lifetime = min(lifetime, left) if lifetime > 0 else left
        self.state = SaslState.AUTHENTICATED
        self.principal = principal
        self._exchange = None
        self._reauthenticating = False
        self._expires_at = self._clock() + lifetime / 1000 if lifetime > 0 else None
        return AuthResult(ErrorCode.none, challenge=challenge, complete=True, session_lifetime_ms=lifetime)

    def _fail(self, message: str, detail: str) -> AuthResult:
        self.state = SaslState.FAILED
        self._exchange = None
        return AuthResult(ErrorCode.sasl_authentication_failed, message, detail=detail)
