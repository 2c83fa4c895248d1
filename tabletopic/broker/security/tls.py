"""TLS for the SSL and SASL_SSL listeners: one server ``ssl.SSLContext`` built from Kafka's PEM keys,
and the principal a client certificate stands for."""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from typing import Any

from tabletopic.broker.security import settings
from tabletopic.config import Config, ConfigError

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


def _load_keys(context: ssl.SSLContext, config: Config, required: bool = True) -> dict[str, str]:
    """Load the broker's key and certificate into ``context``; returns the same keys spelled for
    librdkafka (empty when none is configured and ``required`` is false)."""
    password = config.get(settings.SSL_KEY_PASSWORD)
    keystore = config.get(settings.SSL_KEYSTORE_LOCATION)
    chain, key = config.get(settings.SSL_KEYSTORE_CERTIFICATE_CHAIN), config.get(settings.SSL_KEYSTORE_KEY)
    cert_file, key_file = config.get(settings.SSL_CERTIFICATE_LOCATION), config.get(settings.SSL_KEY_LOCATION)
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
        which = (
            "ssl.keystore.location"
            if keystore
            else "ssl.keystore.key"
            if chain
            else "ssl.certificate.location"
        )
        raise ConfigError(f"{which}: cannot load the broker's key and certificate: {exc}") from exc
    if required:
        raise ConfigError(
            "an SSL or SASL_SSL listener needs the broker's key and certificate: set "
            "ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key, or "
            "ssl.certificate.location and ssl.key.location"
        )
    return {}


def _load_truststore(context: ssl.SSLContext, config: Config) -> dict[str, str]:
    """Load the trusted certificates into ``context``; returns them spelled for librdkafka (empty
    when none is configured)."""
    location = config.get(settings.SSL_TRUSTSTORE_LOCATION)
    inline = config.get(settings.SSL_TRUSTSTORE_CERTIFICATES)
    try:
        if location:
            context.load_verify_locations(cafile=location)
            return {"ssl.ca.location": location}
        if inline:
            context.load_verify_locations(cadata=inline)
            return {"ssl.ca.pem": inline}
    except (OSError, ssl.SSLError) as exc:
        key = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        raise ConfigError(f"{key}: cannot load the trusted certificates: {exc}") from exc
    return {}


def enabled_versions(config: Config) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """The lowest and highest TLS version ``ssl.enabled.protocols`` allows (Kafka listeners and the
    HTTPS services alike). Raises ConfigError naming the key."""
    versions = []
    for name in config.get(settings.SSL_ENABLED_PROTOCOLS):
        if name not in _VERSIONS:
            raise ConfigError(f"ssl.enabled.protocols: {name} is not one of {', '.join(_VERSIONS)}")
        versions.append(_VERSIONS[name])
    if not versions:
        raise ConfigError("ssl.enabled.protocols must name at least one TLS version")
    return min(versions), max(versions)


def server_context(config: Config) -> ssl.SSLContext:
    """The TLS context of every SSL/SASL_SSL listener. Raises ConfigError naming the key to fix."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = enabled_versions(config)
    _load_keys(context, config)
    client_auth = config.get(settings.SSL_CLIENT_AUTH)
    has_truststore = bool(_load_truststore(context, config))
    if client_auth != "none":
        if not has_truststore:
            raise ConfigError(
                f"ssl.client.auth={client_auth} needs ssl.truststore.location (or "
                "ssl.truststore.certificates) to check client certificates against"
            )
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
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


def client_context(config: Config) -> tuple[ssl.SSLContext, dict[str, str]]:
    """The broker's own TLS client side, for its connections to its cluster's SSL listeners: it
    trusts the truststore (else the system's CAs) and shows its own certificate when it has one.
    Also the same settings spelled for librdkafka (the node's own confluent-kafka clients)."""
    context = ssl.create_default_context()
    rdkafka = _load_truststore(context, config)
    return context, rdkafka | _load_keys(context, config, required=False)
