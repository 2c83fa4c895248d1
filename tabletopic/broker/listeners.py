"""Named Kafka listeners, as Kafka configures them: ``listeners`` lists ``NAME://HOST:PORT``,
``listener.security.protocol.map`` gives each name its security protocol (a name that is itself a
protocol, ``SASL_SSL://...``, needs no entry), ``advertised.listeners`` says per name what clients
are told, and ``inter.broker.listener.name`` picks the listener the node's own clients use.

A client is always answered with endpoints of the listener it came in on (Metadata,
FindCoordinator, DescribeCluster), so a client of an internal plaintext listener and one of an
external TLS listener each stay on their own network. Every broker of a cluster must use the same
listener names, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tabletopic.broker import settings
from tabletopic.broker.context import SecurityProtocol
from tabletopic.config import Config, ConfigError

WILDCARD_HOSTS = ("0.0.0.0", "::", "")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: its security protocol, address and name (the protocol's own name when the
    listener is not named)."""

    protocol: SecurityProtocol
    host: str
    port: int
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", str(self.protocol))

    def at(self, host: str, port: int) -> Endpoint:
        return Endpoint(self.protocol, host, port, self.name)

    @property
    def address(self) -> str:
        """``host:port`` as a client's ``bootstrap.servers`` takes it (an IPv6 host in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_protocol_map(entries: Iterable[str]) -> dict[str, SecurityProtocol]:
    """``["INTERNAL:PLAINTEXT", ...]`` -> ``{"INTERNAL": PLAINTEXT}``; the four protocol names
    always map to themselves unless the map says otherwise.

    Raises:
        ConfigError: an entry is not NAME:PROTOCOL or names an unknown protocol.
    """
    key = settings.LISTENER_SECURITY_PROTOCOL_MAP.name
    mapping: dict[str, SecurityProtocol] = {str(p): p for p in SecurityProtocol}
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"{key}: entry {entry!r} must be LISTENER_NAME:SECURITY_PROTOCOL")
        try:
            mapping[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            served = ", ".join(SecurityProtocol)
            raise ConfigError(f"{key}: {entry!r} names protocol {protocol!r}, not one of {served}") from None
    return mapping


def parse_listener(text: str, protocols: dict[str, SecurityProtocol] | None = None) -> Endpoint:
    """``INTERNAL://127.0.0.1:9092`` -> Endpoint, the protocol looked up in ``protocols`` (the
    parsed ``listener.security.protocol.map``; the protocol names alone without it).

    Raises:
        ValueError: the text is malformed or its name has no security protocol.
    """
    name, sep, rest = text.strip().partition("://")
    if not sep:
        raise ValueError(f"listener {text!r} must look like NAME://HOST:PORT")
    name = name.strip().upper()
    mapping = protocols if protocols is not None else parse_protocol_map([])
    if name not in mapping:
        served = " or ".join(SecurityProtocol)
        raise ValueError(
            f"listener {text!r}: {name} is neither {served} nor named in "
            f"{settings.LISTENER_SECURITY_PROTOCOL_MAP.name} (add {name}:PROTOCOL to it)"
        )
    host, _, port = rest.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"listener {text!r}: port {port!r} is not a number") from None
    return Endpoint(mapping[name], host.strip("[]") or "0.0.0.0", number, name)


def configured_listeners(config: Config) -> list[Endpoint]:
    """``listeners`` parsed, each name used once.

    Raises:
        ConfigError: a listener is malformed, unmapped or named twice; the message names the key.
    """
    protocols = parse_protocol_map(config.get(settings.LISTENER_SECURITY_PROTOCOL_MAP))
    endpoints = []
    for text in config.get(settings.LISTENERS):
        try:
            endpoints.append(parse_listener(text, protocols))
        except ValueError as exc:
            raise ConfigError(f"{settings.LISTENERS.name}: {exc}") from None
    names = [e.name for e in endpoints]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{settings.LISTENERS.name}: listener name {', '.join(twice)} used more than once")
    if not endpoints:
        raise ConfigError(f"{settings.LISTENERS.name} is empty: name at least one listener")
    return endpoints


def advertised_endpoints(config: Config, bound: list[Endpoint]) -> dict[str, Endpoint]:
    """What clients of each listener are told: the bound address, replaced per name by
    ``advertised.listeners``; a wildcard host becomes this machine's loopback.

    Raises:
        ConfigError: an advertised listener is malformed or names no configured listener.
    """
    protocols = parse_protocol_map(config.get(settings.LISTENER_SECURITY_PROTOCOL_MAP))
    advertised = {e.name: e for e in bound}
    for text in config.get(settings.ADVERTISED_LISTENERS):
        try:
            endpoint = parse_listener(text, protocols)
        except ValueError as exc:
            raise ConfigError(f"{settings.ADVERTISED_LISTENERS.name}: {exc}") from None
        if endpoint.name not in advertised:
            raise ConfigError(
                f"{settings.ADVERTISED_LISTENERS.name}: {endpoint.name} is not a listener of "
                f"{settings.LISTENERS.name} ({', '.join(advertised)})"
            )
        advertised[endpoint.name] = endpoint
    return {
        name: e.at("127.0.0.1", e.port) if e.host in WILDCARD_HOSTS else e for name, e in advertised.items()
    }


def inter_broker_listener(config: Config, names: Iterable[str]) -> str:
    """The listener the node's own clients use (``inter.broker.listener.name``; else the listener
    named PLAINTEXT, else the first).

    Raises:
        ConfigError: the key names no configured listener.
    """
    listed = list(names)
    chosen = (config.get(settings.INTER_BROKER_LISTENER_NAME) or "").strip().upper()
    if chosen:
        if chosen not in listed:
            raise ConfigError(
                f"{settings.INTER_BROKER_LISTENER_NAME.name}: {chosen} is not a listener of "
                f"{settings.LISTENERS.name} ({', '.join(listed)})"
            )
        return chosen
    return str(SecurityProtocol.PLAINTEXT) if SecurityProtocol.PLAINTEXT in listed else listed[0]


def client_endpoint(config: Config) -> Endpoint:
    """The listener a client command on this machine uses: the first whose security protocol is
    PLAINTEXT (by ``listener.security.protocol.map``, so ``INTERNAL://...`` mapped to PLAINTEXT
    counts), else the first, at the address ``advertised.listeners`` gives it.

    Raises:
        ConfigError: the listeners are malformed (the message names the key).
    """
    endpoints = list(advertised_endpoints(config, configured_listeners(config)).values())
    plain = [e for e in endpoints if e.protocol is SecurityProtocol.PLAINTEXT]
    return (plain or endpoints)[0]
