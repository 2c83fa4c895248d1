"""Authentication for the node's HTTP services (schema registry, Iceberg REST catalog, admin API):
HTTP Basic against the same users as SASL (``sasl.plain.users`` and SCRAM credentials), bearer
tokens from the catalog's OAuth2 client-credentials endpoint (``/v1/oauth/tokens``, what
pyiceberg's and Spark's ``credential=`` use), read-only and read-write roles, and refusals in each
protocol's own error shape. One ASGI middleware; each service supplies its :class:`HttpProtocol`.

This module is foundation: the registry, the catalog and the admin API use it without importing the
broker. Who the users are and which TLS keys the services present belong to the broker's security
(``broker/security/http_auth.py``), which the assembly hands to each service as an
:class:`HttpSecurity`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qs

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

READ, WRITE = "read", "write"
# The HTTPS services' own ssl.* keys: http.ssl.client.auth before ssl.client.auth, and so on.
HTTP_PREFIX = "http."
TOKEN_PATH = "/v1/oauth/tokens"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class HttpProtocol:
    """How one service speaks: its error body for 401/403, which requests write, which paths stay
    open (liveness), and whether it serves the OAuth2 token endpoint."""

    error: Callable[[int, str], dict[str, Any]]
    is_write: Callable[[str, str], bool]
    open_paths: frozenset[str] = frozenset()
    serves_tokens: bool = False


def _writes_by_method(method: str, path: str) -> bool:
    return method not in _SAFE_METHODS


def _registry_writes(method: str, path: str) -> bool:
    """Confluent's rule: a POST that looks a schema up or checks compatibility only reads."""
    if method in _SAFE_METHODS:
        return False
    parts = [p for p in path.split("/") if p]
    lookup = parts[:1] == ["compatibility"] or (len(parts) == 2 and parts[0] == "subjects")
    return not (method == "POST" and lookup)


# The one POST route of the Iceberg REST catalog that changes nothing: a scan or commit report
# (``POST /v1/namespaces/{namespace}/tables/{table}/metrics``). Matched on the whole route, segment by
# segment as the router matches it: a table may itself be named ``metrics``, and
# ``POST /v1/namespaces/{namespace}/tables/metrics`` is then that table's updateTable, a write.
_CATALOG_REPORT_ROUTE = ("v1", "namespaces", None, "tables", None, "metrics")


def _catalog_writes(method: str, path: str) -> bool:
    if method in _SAFE_METHODS:
        return False
    parts = path.split("/")[1:] if path.startswith("/") else path.split("/")
    is_report = len(parts) == len(_CATALOG_REPORT_ROUTE) and all(
        bool(part) if expected is None else part == expected
        for part, expected in zip(parts, _CATALOG_REPORT_ROUTE, strict=True)
    )
    return not (method == "POST" and is_report)


SCHEMA_REGISTRY = HttpProtocol(
    error=lambda status, message: {"error_code": status * 100 + 1, "message": message},
    is_write=_registry_writes,
)
ICEBERG_REST = HttpProtocol(
    error=lambda status, message: {
        "error": {
            "message": message,
            "type": "NotAuthorizedException" if status == 401 else "ForbiddenException",
            "code": status,
        }
    },
    is_write=_catalog_writes,
    open_paths=frozenset({TOKEN_PATH}),
    serves_tokens=True,
)
ADMIN_API = HttpProtocol(
    error=lambda status, message: {"detail": message},
    is_write=_writes_by_method,
    open_paths=frozenset({"/health"}),
)


class Tokens:
    """Bearer tokens: ``base64(user|role|expiry).signature``, signed with a key from
    ``http.oauth.token.secret`` (shared by the nodes of a cluster) or a random per-process key."""

    def __init__(self, secret: bytes, lifetime_s: float, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self.lifetime_s = lifetime_s
        self._clock = clock

    def issue(self, user: str, role: str, version: str = "", lifetime_s: float | None = None) -> str:
        """A token for ``user`` in ``role``, valid ``lifetime_s`` (default: the configured lifetime);
        ``version`` is the digest of the user's credentials (:meth:`HttpAuthenticator.identify`
        refuses the token once they change)."""
        claims = [
            user,
            role,
            self._clock() + (self.lifetime_s if lifetime_s is None else lifetime_s),
            version,
        ]
        payload = base64.urlsafe_b64encode(json.dumps(claims).encode())
        signature = base64.urlsafe_b64encode(hmac.new(self._secret, payload, hashlib.sha256).digest())
        return f"{payload.decode()}.{signature.decode()}"

    def claims(self, token: str) -> tuple[str, str, str] | None:
        """``(user, role, credential version)`` of a valid, unexpired token, else None."""
        payload, _, signature = token.partition(".")
        expected = base64.urlsafe_b64encode(hmac.new(self._secret, payload.encode(), hashlib.sha256).digest())
        if not hmac.compare_digest(expected, signature.encode()):
            return None
        try:
            user, role, expiry, version = json.loads(base64.urlsafe_b64decode(payload))
        except (ValueError, TypeError):
            return None
        return (str(user), str(role), str(version)) if float(expiry) > self._clock() else None

    def verify(self, token: str) -> tuple[str, str] | None:
        """``(user, role)`` of a valid, unexpired token, else None."""
        claims = self.claims(token)
        return None if claims is None else claims[:2]


# Wrong HTTP Basic passwords: after FREE_FAILURES from one client for one user, that client's next
# attempts for that user are refused unchecked (the same 401) for 1, 2, 4 ... up to 60 s, so a
# password cannot be guessed at request rate (nor PBKDF2 be made to burn the node's CPU).
FREE_FAILURES = 3
MAX_BACKOFF_S = 60.0
# How long a user's credential version is trusted before it is read again (a changed password or a
# deleted user ends that user's tokens and remembered logins within this time).
VERSION_TTL_S = 2.0
# The principal of the node's own engines (its Spark session) at its REST catalog, and how long
# their token lasts: as long as the authenticator that issued it, whose nonce it carries.
NODE_PRINCIPAL = "tabletopic-node"
NODE_TOKEN_LIFETIME_S = 100 * 365 * 24 * 3600.0
# Without http.oauth.token.secret: one key for the whole node, so a token from the catalog's
# endpoint is accepted by the registry and the admin API of the same node, as documented.
PROCESS_TOKEN_SECRET = secrets.token_bytes(32)


@dataclass(eq=False, repr=False)  # no repr: it would show who logged in
class HttpAuthenticator:
    """Who a request is and what it may do.

    Args:
        check_password: verifies a user and password (the SASL users).
        writers: users with the read-write role (``http.readwrite.users``, ``*`` for all, and
            ``super.users``); every other authenticated user reads only.
        realm: ``authentication.realm``, in WWW-Authenticate.
        tokens: the bearer-token signer.
        credential_version: a digest of a user's current credentials, None for no such user; a
            bearer token or remembered login of an older version is refused. None: not checked.
        clock: monotonic seconds.
    """

    check_password: Callable[[str, str], bool]
    writers: set[str]
    realm: str
    tokens: Tokens
    credential_version: Callable[[str], str | None] | None = None
    clock: Callable[[], float] = time.monotonic
    _verified: dict[tuple[str, bytes], tuple[float, str]] = field(default_factory=dict, init=False)
    _versions: dict[str, tuple[float, str | None]] = field(default_factory=dict, init=False)
    _failures: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict, init=False)
    # The credential version of node_token(): random, so no user's tokens carry it and no other
    # authenticator (another service, node or restart) accepts the node's token.
    _node_version: str = field(default_factory=lambda: "node:" + secrets.token_hex(16), init=False)

    def node_token(self) -> str:
        """A read-write bearer token for the node's own Spark session, valid at the services this
        authenticator guards for as long as the process runs. Spark's Iceberg REST client sends it
        on every request (``token``); without it a node with ``authentication.method=BASIC`` could
        not reach its own catalog, and every ingest job run on Spark failed with 401."""
        return self.tokens.issue(NODE_PRINCIPAL, WRITE, self._node_version, lifetime_s=NODE_TOKEN_LIFETIME_S)

    def role_of(self, user: str) -> str:
        return WRITE if "*" in self.writers or user in self.writers else READ

    def version_of(self, user: str) -> str | None:
        """The user's credential version ("" when versions are not checked), read at most every
        ``VERSION_TTL_S``."""
        if self.credential_version is None:
            return ""
        now = self.clock()
        cached = self._versions.get(user)
        if cached is not None and cached[0] > now:
            return cached[1]
        version = self.credential_version(user)
        if len(self._versions) > 10_000:
            self._versions.clear()
        self._versions[user] = (now + VERSION_TTL_S, version)
        return version

    def login(self, user: str, password: str, client: str = "") -> bool:
        """Check a password, remembering a success for a minute (PBKDF2 per request would dominate)
        while the user's credentials stay the same; wrong passwords back off (``FREE_FAILURES``)."""
        now = self.clock()
        failures, refused_until = self._failures.get((client, user), (0, 0.0))
        if refused_until > now:
            return False
        key = (user, hashlib.sha256(password.encode()).digest())
        remembered = self._verified.get(key)
        if remembered is not None and remembered[0] > now and remembered[1] == self.version_of(user):
            self._failures.pop((client, user), None)
            return True
        if not self.check_password(user, password):
            failures += 1
            backoff = (
                0.0
                if failures <= FREE_FAILURES
                else min(2.0 ** (failures - FREE_FAILURES - 1), MAX_BACKOFF_S)
            )
            if len(self._failures) > 10_000:
                self._failures.clear()
            self._failures[(client, user)] = (failures, now + backoff)
            log.info("HTTP login of %s from %s failed (%d in a row)", user, client or "?", failures)
            return False
        self._failures.pop((client, user), None)
        if len(self._verified) > 10_000:
            self._verified.clear()
        self._verified[key] = (now + 60, self.version_of(user) or "")
        return True

    def identify(self, authorization: str | None, client: str = "") -> tuple[str, str] | None:
        """``(user, role)`` from an Authorization header, or None."""
        if not authorization:
            return None
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer":
            claims = self.tokens.claims(value.strip())
            if claims is None:
                return None
            if claims[2] != self._node_version and claims[2] != self.version_of(claims[0]):
                return None  # forged, expired, or issued before a password change or deletion
            return claims[0], claims[1]
        if scheme.lower() != "basic":
            return None
        try:
            user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except ValueError:
            return None
        if not sep or not self.login(user, password, client):
            return None
        return user, self.role_of(user)

    def wrap(self, app: ASGIApp, protocol: HttpProtocol) -> ASGIApp:
        """``app`` behind authentication, answering refusals in ``protocol``'s shape."""
        authenticator = self

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            path, method = scope.get("path", ""), scope.get("method", "GET")
            if protocol.serves_tokens and path == TOKEN_PATH and method == "POST":
                await authenticator._serve_token(scope, receive, send)
                return
            if path in protocol.open_paths:
                await app(scope, receive, send)
                return
            headers = {k.decode().lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            who = authenticator.identify(headers.get("authorization"), _client_host(scope))
            if who is None:
                await _json(send, 401, protocol.error(401, "Unauthorized"), authenticator._challenge())
                return
            user, role = who
            if role != WRITE and protocol.is_write(method, path):
                message = f"User {user} has the read-only role and may not {method} {path}"
                await _json(send, 403, protocol.error(403, message))
                return
            scope.setdefault("state", {})["principal"] = f"User:{user}"
            await app(scope, receive, send)

        return guarded

    def _challenge(self) -> list[tuple[bytes, bytes]]:
        return [(b"www-authenticate", f'Basic realm="{self.realm}"'.encode())]

    async def _serve_token(self, scope: Scope, receive: Receive, send: Send) -> None:
        """RFC 6749 client credentials (section 4.4), as the Iceberg REST spec describes it: the
        client id and secret in the form or in a Basic header."""
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > 65536:
                await _json(send, 400, {"error": "invalid_request", "error_description": "body too large"})
                return
            if not message.get("more_body"):
                break
        form = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
        if form.get("grant_type") != "client_credentials":
            await _json(
                send, 400, {"error": "unsupported_grant_type", "error_description": "use client_credentials"}
            )
            return
        user, password = form.get("client_id"), form.get("client_secret")
        headers = {k.decode().lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if user is None and headers.get("authorization", "").lower().startswith("basic "):
            try:
                decoded = base64.b64decode(headers["authorization"][6:].strip(), validate=True).decode()
            except ValueError:
                decoded = ""
            user, _, password = decoded.partition(":")
        if not user or password is None or not self.login(user, password, _client_host(scope)):
            error = {"error": "invalid_client", "error_description": "Invalid client credentials"}
            await _json(send, 401, error, self._challenge())
            return
        token = self.tokens.issue(user, self.role_of(user), self.version_of(user) or "")
        await _json(
            send,
            200,
            {
                "access_token": token,
                "token_type": "bearer",
                "expires_in": int(self.tokens.lifetime_s),
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            },
        )


def _client_host(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


async def _json(
    send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class HttpSecurity(Protocol):
    """How the node's HTTP services are secured: who may call them and which TLS keys they present.

    Implemented by the broker's security (it owns the SASL users, SCRAM credentials and ``ssl.*``
    keys) and handed down by the assembly, so a service never reaches into the broker for it.
    """

    def authenticator(self) -> HttpAuthenticator | None:
        """The authenticator ``authentication.method`` asks for, or None (NONE, the default).

        Raises:
            ConfigError: an unknown method; the message names the key.
        """

    def https_options(self, listener: str) -> dict[str, Any]:
        """uvicorn's TLS options for an ``https://`` listener, else {}.

        Raises:
            ConfigError: an https listener without its keys; the message names the keys.
        """


class PlainHttp:
    """:class:`HttpSecurity` of a service started on its own (tests, tools): no authentication and
    no TLS, whatever the configuration says."""

    def authenticator(self) -> HttpAuthenticator | None:
        return None

    def https_options(self, listener: str) -> dict[str, Any]:
        return {}


def protect(app: Any, security: HttpSecurity, protocol: HttpProtocol) -> Any:
    """``app`` behind the authentication ``security`` asks for (itself without one)."""
    authenticator = security.authenticator()
    return authenticator.wrap(app, protocol) if authenticator is not None else app
