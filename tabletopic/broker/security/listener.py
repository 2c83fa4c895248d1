"""What the connections of each listener need for security, built once from the configuration: the
TLS context of each SSL/SASL_SSL listener (its own ``listener.name.<listener>.ssl.*`` keys before the
broker-wide ``ssl.*``) and a fresh SASL server per SASL connection."""

from __future__ import annotations

import hashlib
import logging
import ssl
from collections.abc import Iterable

from tabletopic.broker import settings as broker_settings
from tabletopic.broker.context import SecurityProtocol
from tabletopic.broker.listeners import Endpoint
from tabletopic.broker.security import settings
from tabletopic.broker.security.oauthbearer import TokenValidator
from tabletopic.broker.security.sasl import SUPPORTED_MECHANISMS, SaslServer, check_plain_password
from tabletopic.broker.security.scram import MIN_ITERATIONS, SCRAM_SHA_256, ScramCredential
from tabletopic.broker.security.store import SecurityStore
from tabletopic.broker.security.tls import TlsSettings, listener_prefix, server_context, unused_listener_keys
from tabletopic.config import Config, ConfigError

log = logging.getLogger(__name__)

TLS_PROTOCOLS = frozenset({SecurityProtocol.SSL, SecurityProtocol.SASL_SSL})
SASL_PROTOCOLS = frozenset({SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL})


def parse_users(entries: list[str]) -> dict[str, str]:
    """``["alice:secret", ...]`` -> ``{"alice": "secret"}``. Raises ConfigError on a bad entry."""
    users = {}
    for entry in entries:
        name, sep, password = entry.partition(":")
        if not sep or not name:
            raise ConfigError(f"sasl.plain.users entry {entry!r} must be user:password")
        users[name] = password
    return users


class ListenerSecurity:
    """Security of the broker's listeners.

    Args:
        config: the node configuration (``ssl.*``, ``sasl.*``).
        store: the SCRAM credentials.
        listeners: the configured listeners (TLS keys are only loaded, and so only required, for
            SSL and SASL_SSL listeners, each with its own ``listener.name.<listener>.ssl.*``).

    Raises:
        ConfigError: a key is missing or malformed; the message names it.
    """

    def __init__(self, config: Config, store: SecurityStore, listeners: Iterable[Endpoint]) -> None:
        self.store = store
        listeners = list(listeners)
        protocols = {endpoint.protocol for endpoint in listeners}
        self._plain_users = parse_users(config.get(broker_settings.SASL_PLAIN_USERS))
        self._check_plain = check_plain_password(self._plain_users)
        mechanisms = [m.strip().upper() for m in config.get(settings.SASL_ENABLED_MECHANISMS) if m.strip()]
        unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unknown:
            raise ConfigError(
                f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported "
                f"(choose from {', '.join(SUPPORTED_MECHANISMS)})"
            )
        if protocols & SASL_PROTOCOLS and not mechanisms:
            raise ConfigError("sasl.enabled.mechanisms is empty but a SASL listener is configured")
        self.mechanisms = mechanisms
        self._oauth = TokenValidator(config) if "OAUTHBEARER" in mechanisms else None
        self.reauth_ms: int = config.get(settings.CONNECTIONS_MAX_REAUTH_MS)
        self.max_receive_before_auth: int = config.get(settings.SASL_SERVER_MAX_RECEIVE_SIZE)
        self.failed_auth_delay_s: float = (
            config.get(settings.CONNECTION_FAILED_AUTHENTICATION_DELAY_MS) / 1000
        )
        self._tls = {
            endpoint.name: server_context(listener_tls(config, endpoint))
            for endpoint in listeners
            if endpoint.protocol in TLS_PROTOCOLS
        }
        broker_wide = config.get(settings.SSL_CLIENT_AUTH)
        for endpoint in listeners:
            own = listener_tls(config, endpoint)
            if own.own_client_auth and broker_wide != "none" and not own.sets(settings.SSL_CLIENT_AUTH):
                # Said at start: before per-listener keys, SASL_SSL listeners followed ssl.client.auth.
                log.info(
                    "SASL_SSL listener %s asks for no client certificate: ssl.client.auth=%s is for SSL "
                    "listeners (KIP-684); set %s to ask here too",
                    endpoint.name,
                    broker_wide,
                    own.name(settings.SSL_CLIENT_AUTH),
                )

    def tls_context(self, endpoint: Endpoint) -> ssl.SSLContext | None:
        """The TLS context of ``endpoint``'s listener; None for PLAINTEXT and SASL_PLAINTEXT."""
        return self._tls.get(endpoint.name)

    def sasl_server(self, protocol: SecurityProtocol) -> SaslServer | None:
        """A new SASL state machine for a connection of this listener; None if it uses no SASL."""
        if protocol not in SASL_PROTOCOLS:
            return None
        return SaslServer(
            self.mechanisms, self.check_password, self.store.credential, self.reauth_ms, oauth=self._oauth
        )

    def check_password(self, user: str, password: str) -> bool:
        """PLAIN (and HTTP Basic): ``sasl.plain.users`` first, then any of the user's SCRAM
        credentials, which the password must derive."""
        if user in self._plain_users:
            return self._check_plain(user, password)
        credentials: list[ScramCredential] = self.store.credentials_of(user)
        if not credentials:
            # Same cost as a wrong password, so a missing user cannot be told by timing.
            SCRAM_SHA_256.salted_password(password, b"\0" * 32, MIN_ITERATIONS)
            return False
        return credentials[0].verifies(password)

    def credential_version(self, user: str) -> str | None:
        """A short digest of the user's current credentials (None: no such user). It changes when
        the password changes, so bearer tokens issued before can be refused."""
        if user in self._plain_users:
            material = b"plain\0" + self._plain_users[user].encode()
        else:
            credentials = self.store.credentials_of(user)
            if not credentials:
                return None
            material = b"".join(c.mechanism.encode() + c.salt + c.stored_key for c in credentials)
        return hashlib.sha256(material).hexdigest()[:16]


def warn_unused_listener_keys(config: Config, listeners: Iterable[Endpoint]) -> None:
    """Log each ``listener.name.<x>.ssl.*`` key no listener reads, once at start: a typo in one
    would otherwise silently leave that listener on the broker-wide setting."""
    tls_listeners = (endpoint.name for endpoint in listeners if endpoint.protocol in TLS_PROTOCOLS)
    for key in unused_listener_keys(config, tls_listeners):
        log.warning(
            "%s is not read: it names no SSL or SASL_SSL listener of listeners, or no key a listener "
            "may set (write the listener name in lower case)",
            key,
        )


def listener_tls(config: Config, endpoint: Endpoint) -> TlsSettings:
    """The ``ssl.*`` keys as ``endpoint``'s listener sees them. On SASL_SSL, ``ssl.client.auth``
    is the listener's own key or none (KIP-684): its clients log in with SASL."""
    return TlsSettings(
        config, listener_prefix(endpoint.name), own_client_auth=endpoint.protocol is SecurityProtocol.SASL_SSL
    )
