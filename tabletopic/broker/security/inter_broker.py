"""How the broker itself connects to a listener of its cluster (``inter.broker.listener.name``):
transaction markers and last-stable-offset queries to other brokers go over the broker's wire
client (:meth:`InterBrokerClient.call`, one kept logged-in connection per broker), the dead-letter
producer over confluent-kafka. On an SSL or SASL_SSL listener the broker trusts its own truststore
and shows its own certificate; on a SASL listener it logs in with
``sasl.mechanism.inter.broker.protocol`` and the credentials of
``listener.name.<listener>.<mechanism>.sasl.jaas.config``, as a Kafka broker does. Its principal
then needs Kafka's CLUSTER_ACTION on the cluster when ACLs are on (or a place in ``super.users``)."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tabletopic.broker import wire_client
from tabletopic.broker.security import settings
from tabletopic.broker.security.oauth_client import client_first
from tabletopic.broker.security.scram import SCRAM_MECHANISMS, ScramClientExchange, ScramFailure
from tabletopic.broker.security.tls import TlsSettings, client_context, listener_prefix
from tabletopic.config import Config, ConfigError

if TYPE_CHECKING:
    from tabletopic.broker.leadership import BrokerEndpoint

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_credentials(text: str) -> tuple[str, str] | None:
    """``username`` and ``password`` of a JAAS login module line; None when either is missing."""
    options = {name: value.replace('\\"', '"') for name, value in _JAAS_OPTION.findall(text)}
    if "username" in options and "password" in options:
        return options["username"], options["password"]
    return None


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


class BrokerUnreachable(Exception):
    """A request to another broker got no answer (connection, login or exchange failed)."""


@dataclass(frozen=True)
class InterBrokerClient:
    """The broker's own client settings for its inter-broker listener."""

    listener: str
    protocol: str
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    tls: ssl.SSLContext | None = None
    tls_rdkafka: tuple[tuple[str, str], ...] = ()  # the same TLS settings spelled for librdkafka
    # Where a refused login's credentials came from, named in the error (default: the JAAS key).
    credentials_from: str | None = None
    # OAUTHBEARER: a fresh token for each login (the CLI's, from its identity provider).
    token: Callable[[], str] | None = None
    pool: wire_client.ConnectionPool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Markers and last-stable-offset queries go to the same few brokers every few seconds:
        # the TLS handshake and SASL login are done once per broker, not once per request.
        object.__setattr__(self, "pool", wire_client.ConnectionPool(self.connect))

    @classmethod
    def from_config(cls, config: Config, listener: str, protocol: str) -> InterBrokerClient:
        """The client for ``listener`` (its security ``protocol``). Raises ConfigError naming the key
        to set when the listener asks for credentials the configuration does not hold."""
        mechanism = username = password = None
        if protocol.startswith("SASL_"):
            mechanism = config.get(settings.SASL_MECHANISM_INTER_BROKER_PROTOCOL)
            key = jaas_key(listener, mechanism)
            credentials = jaas_credentials(config.prefixed("").get(key, ""))
            if credentials is None:
                raise ConfigError(
                    f"inter.broker.listener.name {listener} is {protocol}: set {key} to the broker's own "
                    f'credentials (username="..." password="...")',
                    key,
                )
            username, password = credentials
        if not protocol.endswith("SSL"):
            return cls(listener, protocol, mechanism, username, password)
        own = TlsSettings(config, listener_prefix(listener))  # the listener's own ssl.* keys first
        tls, rdkafka = client_context(own)
        tls.check_hostname = own.get(settings.SSL_ENDPOINT_IDENTIFICATION_ALGORITHM) == "https"
        rdkafka["ssl.endpoint.identification.algorithm"] = "https" if tls.check_hostname else "none"
        return cls(listener, protocol, mechanism, username, password, tls, tuple(rdkafka.items()))

    async def call(
        self,
        brokers: Iterable[BrokerEndpoint],
        node: int,
        api_key: int,
        version: int,
        socket_timeout: float,
        **fields: Any,
    ) -> Any:
        """One request to broker ``node`` (its endpoint among ``brokers``, this client's listener),
        logged in as the broker, in a thread (``socket_timeout`` per socket operation), on the
        connection kept for that endpoint when there is one; the decoded answer. Raises LookupError
        when ``node`` has no endpoint there (not alive), BrokerUnreachable when the exchange fails
        (on a new connection: a kept one the peer dropped is replaced first)."""
        endpoint = next((b for b in brokers if b.node_id == node), None)
        if endpoint is None:
            raise LookupError(f"broker {node} has no live endpoint on {self.listener}")
        address = f"{endpoint.host}:{endpoint.port}"
        try:
            return await asyncio.to_thread(
                self.pool.call, address, api_key, version, socket_timeout, **fields
            )
        except (OSError, ValueError) as exc:
            raise BrokerUnreachable(f"{address}: {exc}") from exc

    def close(self) -> None:
        """Close the kept connections (the broker is stopping)."""
        self.pool.close()

    def connect(self, host: str, port: int, timeout: float) -> socket.socket:
        """A connection to ``host:port`` ready for requests: TLS handshake and SASL login done."""
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=host)
            if self.mechanism is not None:
                self._login(sock)
        except BaseException:
            sock.close()
            raise
        return sock

    def _login(self, sock: socket.socket) -> None:
        assert self.mechanism is not None
        answer = wire_client.exchange(sock, SASL_HANDSHAKE, 1, mechanism=self.mechanism)
        if answer.error_code.value != 0:
            raise ConnectionRefusedError(
                f"SASL mechanism {self.mechanism} refused (offered: {', '.join(answer.mechanisms)}): "
                f"change {settings.SASL_MECHANISM_INTER_BROKER_PROTOCOL.name}"
            )
        if self.mechanism == "OAUTHBEARER":
            self._bearer_login(sock)
            return
        assert self.username is not None and self.password is not None
        if self.mechanism == "PLAIN":
            self._authenticate(sock, f"\0{self.username}\0{self.password}".encode())
            return
        scram = ScramClientExchange(SCRAM_MECHANISMS[self.mechanism], self.username, self.password)
        server_first = self._authenticate(sock, scram.first())
        try:
            scram.verify(self._authenticate(sock, scram.final(server_first)))
        except (ScramFailure, ValueError) as exc:
            raise ConnectionRefusedError(f"SCRAM login as {self.username}: {exc}") from exc

    def _bearer_login(self, sock: socket.socket) -> None:
        """RFC 7628: a refused token is answered first with an error challenge, which the client
        acknowledges with a lone 0x01 to get the refusal itself."""
        assert self.token is not None
        challenge = self._authenticate(sock, client_first(self.token()))
        if challenge:
            self._authenticate(sock, b"\x01")
            raise ConnectionRefusedError(f"SASL login as {self.username} refused: {challenge.decode()}")

    def _authenticate(self, sock: socket.socket, token: bytes) -> bytes:
        answer = wire_client.exchange(sock, SASL_AUTHENTICATE, 2, auth_bytes=token)
        if answer.error_code.value != 0:
            raise ConnectionRefusedError(
                f"SASL login as {self.username} refused: {answer.error_message} "
                f"(check {self.credentials_from or jaas_key(self.listener, self.mechanism or '')})"
            )
        return bytes(answer.auth_bytes)

    def librdkafka(self) -> dict[str, str]:
        """The same settings for the node's own confluent-kafka clients."""
        result = {"security.protocol": self.protocol.lower()}
        if self.mechanism is not None:
            result |= {"sasl.mechanism": self.mechanism, "sasl.username": self.username or ""}
            result["sasl.password"] = self.password or ""
        return result | dict(self.tls_rdkafka)
