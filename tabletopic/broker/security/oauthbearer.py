"""SASL/OAUTHBEARER (RFC 7628, KIP-255) with the broker-side JWT validation of KIP-768: the client
sends a signed JWT; its signature is checked against the keys of a JWKS document
(``sasl.oauthbearer.jwks.endpoint.url``, a ``file://`` URL as Kafka allows), its ``exp`` (and
``nbf``) against the clock with ``sasl.oauthbearer.clock.skew.seconds`` of slack, its ``aud`` and
``iss`` against ``sasl.oauthbearer.expected.audience`` / ``.issuer`` when set; the principal is
``User:`` + the ``sasl.oauthbearer.sub.claim.name`` claim. The token's expiry bounds the session
(KIP-368): the connection must re-authenticate with a fresh token before it runs out.

As in Kafka, a refused token is first answered with the RFC 7628 error challenge
``{"status":"invalid_token"}``; the client acknowledges it with a lone 0x01 and only then gets
SaslAuthenticate's SASL_AUTHENTICATION_FAILED, carrying that message. Sans-IO, like the rest of
:mod:`~tabletopic.broker.security.sasl`: the JWKS file is re-read only when its modification time
changes (a key rotation needs no restart).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from tabletopic.broker.security import settings
from tabletopic.config import Config, ConfigError

log = logging.getLogger(__name__)

# Asymmetric signatures only: a JWKS publishes public keys, and "none" or a shared-secret HMAC
# would let anyone holding the document mint tokens.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
INVALID_TOKEN = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
_KVSEP = b"\x01"


class TokenRefused(Exception):
    """The token is not acceptable; the message says why (server log only)."""


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal: str
    expires_ms: int  # wall-clock milliseconds


class JwksFile:
    """The keys of a JWKS document on disk, re-read when the file changes.

    Raises:
        ConfigError: (at construction) the URL is not a file URL or the file is unreadable.
    """

    def __init__(self, url: str) -> None:
        key = settings.SASL_OAUTHBEARER_JWKS_ENDPOINT_URL.name
        parsed = urlparse(url)
        if parsed.scheme in ("http", "https"):
            raise ConfigError(
                f"{key}: only file:// URLs are supported here (download the JWKS document to a file "
                "and point at it; it is re-read whenever it changes)"
            )
        if parsed.scheme not in ("file", ""):
            raise ConfigError(f"{key}: {url!r} is not a file:// URL")
        self.path = Path(unquote(parsed.path) if parsed.scheme else url)
        self._mtime = -1.0
        self._keys: KeySet | None = None
        try:
            self.keys()
        except (OSError, ValueError, JoseError) as exc:
            raise ConfigError(f"{key}: cannot load the JWKS document {self.path}: {exc}") from None

    def keys(self) -> KeySet:
        mtime = os.stat(self.path).st_mtime
        if self._keys is None or mtime != self._mtime:
            document = json.loads(self.path.read_text(encoding="utf-8"))
            self._keys = KeySet.import_key_set(document)
            self._mtime = mtime
        return self._keys


class TokenValidator:
    """Validates OAUTHBEARER tokens as Kafka's broker-side JWT validator does.

    Args:
        config: the ``sasl.oauthbearer.*`` keys.
        now: wall-clock seconds.

    Raises:
        ConfigError: the JWKS URL is missing or unusable; the message names the key.
    """

    def __init__(self, config: Config, now: Callable[[], float] = time.time) -> None:
        url = config.get(settings.SASL_OAUTHBEARER_JWKS_ENDPOINT_URL)
        if not url:
            raise ConfigError(
                f"sasl.enabled.mechanisms includes OAUTHBEARER: set "
                f"{settings.SASL_OAUTHBEARER_JWKS_ENDPOINT_URL.name} to the JWKS file of the token issuer"
            )
        self._jwks = JwksFile(url)
        self._audience = [
            a.strip() for a in config.get(settings.SASL_OAUTHBEARER_EXPECTED_AUDIENCE) if a.strip()
        ]
        self._issuer: str | None = config.get(settings.SASL_OAUTHBEARER_EXPECTED_ISSUER) or None
        self._sub_claim: str = config.get(settings.SASL_OAUTHBEARER_SUB_CLAIM_NAME)
        self._skew_s: int = config.get(settings.SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS)
        self._now = now

    def validate(self, token: str) -> ValidToken:
        """Raises TokenRefused with the reason."""
        try:
            decoded = jwt.decode(token, self._jwks.keys(), algorithms=ALGORITHMS)
        except OSError as exc:
            raise TokenRefused(f"JWKS document unreadable: {exc}") from None
        except (JoseError, ValueError) as exc:
            raise TokenRefused(f"signature or format: {type(exc).__name__}: {exc}") from None
        claims = decoded.claims
        options: dict[str, jwt.ClaimsOption] = {"exp": {"essential": True}}
        if self._audience:
            options["aud"] = {"essential": True, "values": self._audience}
        if self._issuer:
            options["iss"] = {"essential": True, "value": self._issuer}
        registry = jwt.JWTClaimsRegistry(now=lambda: int(self._now()), leeway=self._skew_s, **options)
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise TokenRefused(f"claims: {type(exc).__name__}: {exc}") from None
        subject = claims.get(self._sub_claim)
        if not isinstance(subject, str) or not subject:
            raise TokenRefused(f"no {self._sub_claim!r} claim to name the principal")
        expires = claims["exp"]
        if not isinstance(expires, int | float):
            raise TokenRefused("exp is not a number")
        return ValidToken(f"User:{subject}", int(expires * 1000))


def parse_client_first(message: bytes) -> tuple[str | None, str]:
    """RFC 7628 ``n,a=authzid,\\x01auth=Bearer TOKEN\\x01...\\x01`` -> (authzid, token).

    Raises:
        TokenRefused: the message is malformed.
    """
    try:
        text = message.decode()
    except UnicodeDecodeError:
        raise TokenRefused("client message is not UTF-8") from None
    header, sep, rest = text.partition(_KVSEP.decode())
    parts = header.split(",")
    if not sep or len(parts) != 3 or parts[0] not in ("n", "y") or parts[2]:
        raise TokenRefused("malformed GS2 header")
    authzid = parts[1][2:] if parts[1].startswith("a=") else None
    if parts[1] and authzid is None:
        raise TokenRefused("malformed GS2 authorization id")
    fields = {}
    for pair in rest.split(_KVSEP.decode()):
        if pair:
            key, eq, value = pair.partition("=")
            if not eq:
                raise TokenRefused("malformed key=value pair")
            fields[key] = value
    scheme, _, token = fields.get("auth", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise TokenRefused("no auth=Bearer token")
    return authzid, token.strip()


class OAuthBearerExchange:
    """The server side of one OAUTHBEARER exchange (used by
    :class:`~tabletopic.broker.security.sasl.SaslServer`).

    :meth:`step` returns ``(challenge, principal)``; the principal once the token is valid. A refused
    token first yields the error challenge; the client's 0x01 then makes :meth:`step` raise.
    """

    def __init__(self, validator: TokenValidator, fail: Callable[[str, str], Exception]) -> None:
        self._validator = validator
        self._fail = fail
        self._refused: str | None = None
        self.expires_ms: int | None = None

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        if self._refused is not None:
            # The client's acknowledgement of the error challenge (or anything else): fail now.
            raise self._fail(INVALID_TOKEN, self._refused)
        try:
            authzid, value = parse_client_first(token)
            valid = self._validator.validate(value)
        except TokenRefused as exc:
            self._refused = f"OAUTHBEARER token refused: {exc}"
            return INVALID_TOKEN.encode(), None
        if authzid and f"User:{authzid}" != valid.principal:
            self._refused = f"authorization id {authzid!r} differs from the token's subject {valid.principal}"
            return INVALID_TOKEN.encode(), None
        self.expires_ms = valid.expires_ms
        return b"", valid.principal
