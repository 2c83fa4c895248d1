"""The broker's side of HTTP authentication: the users behind HTTP Basic and tokens are the SASL
users (``sasl.plain.users`` and SCRAM credentials), and the HTTPS services present the broker's
``ssl.*`` keys (each overridable with an ``http.`` prefix). The middleware itself, the services'
protocols and tokens live in the foundation (:mod:`tabletopic.http_auth`), so the registry and the
catalog are secured without importing the broker: the assembly hands them a :class:`BrokerHttpSecurity`.
"""

from __future__ import annotations

import ssl
from typing import Any

from sqlalchemy.engine import Engine

from tabletopic.broker.security import settings
from tabletopic.broker.security.acls import parse_super_users
from tabletopic.broker.security.listener import ListenerSecurity
from tabletopic.broker.security.store import SecurityStore
from tabletopic.broker.security.tls import TlsSettings, client_auth, client_context, enabled_versions
from tabletopic.config import Config, ConfigError
from tabletopic.http_auth import HTTP_PREFIX, PROCESS_TOKEN_SECRET, HttpAuthenticator, Tokens
from tabletopic.http_service import TLS_VERSIONS


def http_authenticator(config: Config, engine: Engine) -> HttpAuthenticator | None:
    """The authenticator ``authentication.method`` asks for, or None (NONE, the default).

    Raises:
        ConfigError: an unknown method; the message names the key.
    """
    method = (config.get(settings.AUTHENTICATION_METHOD) or "NONE").upper()
    if method == "NONE":
        return None
    if method != "BASIC":
        raise ConfigError(f"authentication.method={method} is not supported (NONE or BASIC)")
    security = ListenerSecurity(config, SecurityStore(engine), [])
    writers = set(config.get(settings.HTTP_READWRITE_USERS))
    writers |= {p.partition(":")[2] for p in parse_super_users(config.get(settings.SUPER_USERS) or "")}
    secret_text = config.get(settings.HTTP_TOKEN_SECRET)
    secret = secret_text.encode() if secret_text else PROCESS_TOKEN_SECRET
    tokens = Tokens(secret, config.get(settings.HTTP_TOKEN_LIFETIME_MS) / 1000)
    return HttpAuthenticator(
        security.check_password,
        writers,
        config.get(settings.AUTHENTICATION_REALM),
        tokens,
        credential_version=security.credential_version,
    )


def https_options(config: Config, listener: str) -> dict[str, Any]:
    """uvicorn's TLS options for an ``https://`` listener, else {}: the ``http.ssl.*`` keys, each
    falling back to the broker-wide ``ssl.*`` key (PEM files).

    Raises:
        ConfigError: an https listener without a key and certificate file, or client certificates
            asked for without a truststore; the message names the keys.
    """
    if not listener.lower().startswith("https://"):
        return {}
    s = settings
    tls = TlsSettings(config, HTTP_PREFIX)
    own = _own_certificate(tls)
    if own is None:
        raise ConfigError(
            f"{listener} is https: set ssl.keystore.location (or ssl.certificate.location and "
            "ssl.key.location), or the same keys with the http. prefix for the HTTPS services alone"
        )
    certfile, keyfile = own
    options: dict[str, Any] = {"ssl_certfile": certfile}
    if keyfile is not None:
        options["ssl_keyfile"] = keyfile
    if tls.get(s.SSL_KEY_PASSWORD):
        options["ssl_keyfile_password"] = tls.get(s.SSL_KEY_PASSWORD)
    # Not a uvicorn option: HttpService applies it to the context uvicorn builds.
    options[TLS_VERSIONS] = enabled_versions(tls)
    verify_mode = client_auth(tls)
    if verify_mode != ssl.CERT_NONE:
        location = tls.get(s.SSL_TRUSTSTORE_LOCATION)
        if not location:  # uvicorn loads CAs from a file only
            raise ConfigError(
                f"{tls.name(s.SSL_CLIENT_AUTH)} on the HTTPS services needs a truststore file: set "
                "http.ssl.truststore.location (or ssl.truststore.location)"
            )
        options["ssl_ca_certs"] = location
        options["ssl_cert_reqs"] = verify_mode
    return options


def https_client_options(config: Config) -> dict[str, Any]:
    """httpx's TLS options for one broker calling another's HTTPS admin API: the broker's TLS client
    context as the HTTPS services' keys give it (the ``http.`` prefixed keys, else the plain ones).
    It trusts the truststore (else the system's CAs) and presents the broker's own certificate,
    which a peer asking for client certificates checks, with an encrypted key opened by
    ``ssl.key.password``. Built once, at start: a file that cannot be read stops the start with the
    key to change, not the first peer call."""
    context, _ = client_context(TlsSettings(config, HTTP_PREFIX))
    return {"verify": context}


def _own_certificate(tls: TlsSettings) -> tuple[str, str | None] | None:
    """The HTTPS services' certificate and key files: a PEM keystore holding both (key ``None``),
    else the certificate and key locations; None when neither is set."""
    s = settings
    keystore = tls.get(s.SSL_KEYSTORE_LOCATION)
    cert, key = tls.get(s.SSL_CERTIFICATE_LOCATION), tls.get(s.SSL_KEY_LOCATION)
    if keystore:
        return str(keystore), None
    if cert and key:
        return str(cert), str(key)
    return None


class BrokerHttpSecurity:
    """:class:`~tabletopic.http_auth.HttpSecurity` from the node's configuration and its SASL users."""

    def __init__(self, config: Config, engine: Engine) -> None:
        self._config = config
        self._engine = engine

    def authenticator(self) -> HttpAuthenticator | None:
        return http_authenticator(self._config, self._engine)

    def https_options(self, listener: str) -> dict[str, Any]:
        return https_options(self._config, listener)
