"""TLS for the SSL and SASL_SSL listeners and the HTTPS services: a server ``ssl.SSLContext`` per
listener built from Kafka's PEM keys, and the principal a client certificate stands for.

Each listener reads Kafka's ``ssl.*`` keys through its own prefix, as Kafka does: a Kafka listener
named EXTERNAL takes ``listener.name.external.ssl.X`` before ``ssl.X``; the HTTPS services take
``http.ssl.X`` before ``ssl.X``. On SASL_SSL listeners ``ssl.client.auth`` comes from the listener's
own key only (KIP-684): their clients authenticate with SASL, and the broker-wide key is meant for
SSL listeners.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import ssl
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tabletopic.broker.security import settings
from tabletopic.config import Config, ConfigError, ConfigKey, T

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# RFC 2253 short names, as Kafka's X500Principal.getName() prints them.
_SHORT_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# The ssl.* keys a listener may set for itself (``listener.name.<listener>.`` + the key).
LISTENER_KEYS = (
    settings.SSL_KEYSTORE_TYPE,
    settings.SSL_KEYSTORE_LOCATION,
    settings.SSL_KEYSTORE_CERTIFICATE_CHAIN,
    settings.SSL_KEYSTORE_KEY,
    settings.SSL_CERTIFICATE_LOCATION,
    settings.SSL_KEY_LOCATION,
    settings.SSL_KEY_PASSWORD,
    settings.SSL_TRUSTSTORE_TYPE,
    settings.SSL_TRUSTSTORE_LOCATION,
    settings.SSL_TRUSTSTORE_CERTIFICATES,
    settings.SSL_CLIENT_AUTH,
    settings.SSL_ENABLED_PROTOCOLS,
    settings.SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
)
_LISTENER_KEY_NAMES = frozenset(key.name for key in LISTENER_KEYS)


def listener_prefix(listener: str) -> str:
    """``EXTERNAL`` -> ``listener.name.external.`` (Kafka lower-cases the name in the key)."""
    return f"listener.name.{listener.lower()}."


@dataclass(frozen=True)
class TlsSettings:
    """Kafka's ``ssl.*`` keys as one listener sees them: ``<prefix>ssl.X`` when set, else ``ssl.X``.

    Args:
        config: the node configuration.
        prefix: the listener's own prefix (``listener.name.external.``, ``http.``); empty: the
            broker-wide keys alone.
        own_client_auth: take ``ssl.client.auth`` from the prefixed key only, ``none`` without it
            (Kafka's rule for SASL_SSL listeners, KIP-684).

    Raises:
        ConfigError: (on :meth:`get`) a prefixed value is malformed; the message names its key.
    """

    config: Config
    prefix: str = ""
    own_client_auth: bool = False
    _own: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        own = self.config.prefixed(self.prefix) if self.prefix else {}
        object.__setattr__(self, "_own", {k: v for k, v in own.items() if k in _LISTENER_KEY_NAMES})

    def sets(self, key: ConfigKey[Any]) -> bool:
        """Whether the listener has its own value of ``key``."""
        return key.name in self._own

    def name(self, key: ConfigKey[Any]) -> str:
        """The key the value of ``key`` comes from, to name in errors."""
        if key.name in self._own or (self.own_client_auth and key is settings.SSL_CLIENT_AUTH):
            return self.prefix + key.name
        return key.name

    def get(self, key: ConfigKey[T]) -> T:
        if key.name in self._own:
            return dataclasses.replace(key, name=self.prefix + key.name).parse(self._own[key.name])
        if self.own_client_auth and key is settings.SSL_CLIENT_AUTH:
            return key.parse("none")  # the key's own default, typed as the key
        return self.config.get(key)


def _settings(config: Config | TlsSettings) -> TlsSettings:
    return config if isinstance(config, TlsSettings) else TlsSettings(config)


def unused_listener_keys(config: Config, listeners: Iterable[str]) -> list[str]:
    """``listener.name.<x>.ssl.*`` keys that no listener reads: ``<x>`` is none of ``listeners``
    (the names of the SSL and SASL_SSL listeners), or the key is not one a listener may set (a typo
    would otherwise silently leave a setting off)."""
    prefixes = {listener_prefix(name) for name in listeners}
    unused = []
    for name in config.prefixed("listener.name."):
        listener, _, rest = name.partition(".")
        if rest.startswith("ssl.") and (
            f"listener.name.{listener}." not in prefixes or rest not in _LISTENER_KEY_NAMES
        ):
            unused.append(f"listener.name.{name}")
    return sorted(unused)


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """Inline PEM to a private temporary file (ssl loads keys from files only), removed after."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        yield path
    finally:
        os.unlink(path)


def _load_keys(
    context: ssl.SSLContext, config: Config | TlsSettings, required: bool = True
) -> dict[str, str]:
    """Load the broker's key and certificate into ``context``; returns the same keys spelled for
    librdkafka (empty when none is configured and ``required`` is false)."""
    tls = _settings(config)
    s = settings
    password = tls.get(s.SSL_KEY_PASSWORD)
    keystore = tls.get(s.SSL_KEYSTORE_LOCATION)
    chain, key = tls.get(s.SSL_KEYSTORE_CERTIFICATE_CHAIN), tls.get(s.SSL_KEYSTORE_KEY)
    cert_file, key_file = tls.get(s.SSL_CERTIFICATE_LOCATION), tls.get(s.SSL_KEY_LOCATION)
    rdkafka = {"ssl.key.password": password} if password else {}
    try:
        if keystore:
            context.load_cert_chain(keystore, password=password)
            return rdkafka | {"ssl.certificate.location": keystore, "ssl.key.location": keystore}
        if chain and key:
            with _pem_file(chain) as chain_path, _pem_file(key) as key_path:
                context.load_cert_chain(chain_path, key_path, password=password)
            return rdkafka | {"ssl.certificate.pem": chain, "ssl.key.pem": key}
        if cert_file and key_file:
            context.load_cert_chain(cert_file, key_file, password=password)
            return rdkafka | {"ssl.certificate.location": cert_file, "ssl.key.location": key_file}
    except (OSError, ssl.SSLError) as exc:
        which = tls.name(
            s.SSL_KEYSTORE_LOCATION
            if keystore
            else s.SSL_KEYSTORE_KEY
            if chain
            else s.SSL_CERTIFICATE_LOCATION
        )
        raise ConfigError(
            f"{which}: cannot load the broker's key and certificate (an encrypted key needs "
            f"{tls.name(s.SSL_KEY_PASSWORD)}): {exc}"
        ) from exc
    if required:
        p = tls.prefix
        raise ConfigError(
            "an SSL or SASL_SSL listener needs the broker's key and certificate: set "
            f"{p}ssl.keystore.location, or {p}ssl.keystore.certificate.chain and {p}ssl.keystore.key, or "
            f"{p}ssl.certificate.location and {p}ssl.key.location"
            + (" (or the same keys without the prefix, for every listener)" if p else "")
        )
    return {}


def _load_truststore(context: ssl.SSLContext, config: Config | TlsSettings) -> dict[str, str]:
    """Load the trusted certificates into ``context``; returns them spelled for librdkafka (empty
    when none is configured)."""
    tls = _settings(config)
    location = tls.get(settings.SSL_TRUSTSTORE_LOCATION)
    inline = tls.get(settings.SSL_TRUSTSTORE_CERTIFICATES)
    try:
        if location:
            context.load_verify_locations(cafile=location)
            return {"ssl.ca.location": location}
        if inline:
            context.load_verify_locations(cadata=inline)
            return {"ssl.ca.pem": inline}
    except (OSError, ssl.SSLError) as exc:
        key = settings.SSL_TRUSTSTORE_LOCATION if location else settings.SSL_TRUSTSTORE_CERTIFICATES
        raise ConfigError(f"{tls.name(key)}: cannot load the trusted certificates: {exc}") from exc
    return {}


def enabled_versions(config: Config | TlsSettings) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """The lowest and highest TLS version ``ssl.enabled.protocols`` allows (Kafka listeners and the
    HTTPS services alike). Raises ConfigError naming the key."""
    tls = _settings(config)
    key = tls.name(settings.SSL_ENABLED_PROTOCOLS)
    versions = []
    for name in tls.get(settings.SSL_ENABLED_PROTOCOLS):
        if name not in _VERSIONS:
            raise ConfigError(f"{key}: {name} is not one of {', '.join(_VERSIONS)}")
        versions.append(_VERSIONS[name])
    if not versions:
        raise ConfigError(f"{key} must name at least one TLS version")
    return min(versions), max(versions)


def client_auth(config: Config | TlsSettings) -> ssl.VerifyMode:
    """What ``ssl.client.auth`` asks of clients (CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED).

    Raises:
        ConfigError: certificates are asked for but no truststore is set to check them against.
    """
    tls = _settings(config)
    wanted = tls.get(settings.SSL_CLIENT_AUTH)
    if wanted == "none":
        return ssl.CERT_NONE
    if not (tls.get(settings.SSL_TRUSTSTORE_LOCATION) or tls.get(settings.SSL_TRUSTSTORE_CERTIFICATES)):
        p = tls.prefix
        raise ConfigError(
            f"{tls.name(settings.SSL_CLIENT_AUTH)}={wanted} needs {p}ssl.truststore.location (or "
            f"{p}ssl.truststore.certificates{', or either without the prefix' if p else ''}) to check "
            "client certificates against"
        )
    return ssl.CERT_REQUIRED if wanted == "required" else ssl.CERT_OPTIONAL


def server_context(config: Config | TlsSettings) -> ssl.SSLContext:
    """The TLS context of an SSL/SASL_SSL listener (``config`` as that listener sees it: a
    :class:`TlsSettings`; a bare Config means the broker-wide keys). Raises ConfigError naming the
    key to fix."""
    tls = _settings(config)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = enabled_versions(tls)
    _load_keys(context, tls)
    verify_mode = client_auth(tls)
    _load_truststore(context, tls)
    context.verify_mode = verify_mode
    return context


def peer_principal(ssl_object: Any) -> str | None:
    """``User:CN=alice,OU=eng,O=example`` for a verified client certificate (RFC 2253, most
    specific first, as Kafka's default principal builder names it); None without one."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    parts = []
    for rdn in reversed(cert.get("subject", ())):
        for name, value in rdn:
            escaped = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
            parts.append(f"{_SHORT_NAMES.get(name, name)}={escaped}")
    return "User:" + ",".join(parts) if parts else None


def client_context(config: Config | TlsSettings) -> tuple[ssl.SSLContext, dict[str, str]]:
    """The broker's own TLS client side, for its connections to its cluster's SSL listeners (the
    keys as its inter-broker listener sees them): it trusts the truststore (else the system's CAs)
    and shows its own certificate when it has one. Also the same settings spelled for librdkafka
    (the node's own confluent-kafka clients).

    A truststore replaces the system's CAs, as in Kafka and librdkafka: a cluster on a private CA
    accepts no certificate a public CA issued for a broker's name."""
    tls = _settings(config)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname checked, certificate required
    rdkafka = _load_truststore(context, tls)
    if not rdkafka:
        context.load_default_certs()
    return context, rdkafka | _load_keys(context, tls, required=False)
