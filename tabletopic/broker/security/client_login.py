"""The CLI's own side of a Kafka listener: which of the node's listeners a client command talks to
when ``--bootstrap-server`` names none, the client settings of ``--command-config``/``-X``
(librdkafka's keys) turned into a connection the broker's wire client can use, and a login tried
before a command starts (with ``-b`` and no security settings, a plaintext request).

Why the check: librdkafka answers a refused login by retrying until its timeout and then reporting
``Broker transport failure``, with the broker's "Invalid username or password" in a log line the
commands keep quiet. One login tried here, with the same settings, fails in a fraction of a second
and names the settings to check. It answers a secured listener given with ``-b`` but no settings
the same way. ``partitions move`` also sends its requests through
:func:`wire_connect`, because confluent-kafka has no AlterPartitionReassignments.
"""

from __future__ import annotations

import functools
import ssl
import struct
from collections.abc import Callable, Mapping
from pathlib import Path

import typer
from rich.markup import escape

from tabletopic.broker.context import SecurityProtocol
from tabletopic.broker.listeners import Endpoint, client_endpoint
from tabletopic.broker.security import oauth_client
from tabletopic.broker.security.inter_broker import InterBrokerClient
from tabletopic.broker.wire_client import Connect, bootstrap_servers, exchange, plain_connect
from tabletopic.cli_common import client_settings, config_refused, err_console, load_config, require_listening
from tabletopic.config import Config, ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
WIRE_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
CREDENTIALS_FROM = "sasl.username and sasl.password of --command-config or -X"
LOGIN_CHECK_TIMEOUT_S = 10.0
# The plaintext check's request: Metadata v1 for no topic, which every Kafka broker answers.
METADATA, METADATA_VERSION = 3, 1


def wire_connect(settings: Mapping[str, str]) -> Connect:
    """TLS and the SASL login (PLAIN, SCRAM, or OAUTHBEARER with a token from the identity
    provider: :mod:`.oauth_client`) that the client settings ask for, read as librdkafka reads
    them, so one ``--command-config`` serves every command. Raises typer.BadParameter for a
    protocol or mechanism it cannot speak, OAUTHBEARER settings it cannot use and unreadable
    ``ssl.*`` files."""
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise typer.BadParameter(f"security.protocol={protocol}: one of {', '.join(PROTOCOLS)}")
    if protocol == "PLAINTEXT":
        return plain_connect
    if not protocol.startswith("SASL_"):
        return InterBrokerClient("client", protocol, tls=tls_context(settings)).connect
    mechanism = settings.get("sasl.mechanism", "GSSAPI").upper()  # librdkafka's default
    if mechanism not in WIRE_SASL_MECHANISMS:
        known = ", ".join(WIRE_SASL_MECHANISMS)
        raise typer.BadParameter(f"this command logs in with sasl.mechanism {known}, not {mechanism}")
    tls = tls_context(settings) if protocol == "SASL_SSL" else None
    token: Callable[[], str] | None = None
    if mechanism == "OAUTHBEARER":
        try:
            credentials = oauth_client.ClientCredentials.from_settings(settings)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        username, password, source = credentials.client_id, None, oauth_client.CREDENTIALS_FROM
        token = functools.partial(credentials.fetch_token, LOGIN_CHECK_TIMEOUT_S)
    else:
        username, password = settings.get("sasl.username", ""), settings.get("sasl.password", "")
        source = CREDENTIALS_FROM
    client = InterBrokerClient(
        "client", protocol, mechanism, username, password, tls, credentials_from=source, token=token
    )
    return client.connect


def tls_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS side of librdkafka's ``ssl.*`` settings: ``ssl.ca.location`` replaces the system's CAs,
    ``ssl.certificate.location``/``ssl.key.location`` are the client's certificate, and the broker's
    name is checked unless ``ssl.endpoint.identification.algorithm=none``."""
    try:
        context = ssl.create_default_context(cafile=settings.get("ssl.ca.location"))
        if "ssl.certificate.location" in settings:
            context.load_cert_chain(
                settings["ssl.certificate.location"],
                settings.get("ssl.key.location"),
                settings.get("ssl.key.password"),
            )
    except OSError as exc:  # a missing or unreadable file, a key that does not match (ssl.SSLError)
        raise typer.BadParameter(f"the client's ssl.* settings: {exc}") from exc
    context.check_hostname = settings.get("ssl.endpoint.identification.algorithm", "https").lower() != "none"
    return context


def node_listener(config: Config) -> Endpoint:
    """The node's listener a client command talks to (:func:`~tabletopic.broker.listeners.client_endpoint`);
    a malformed listener ends the command with one line that names the key (exit 2)."""
    try:
        return client_endpoint(config)
    except ConfigError as exc:
        raise config_refused(exc) from exc


def node_bootstrap(ctx: typer.Context, bootstrap: str | None, settings: Mapping[str, str]) -> str:
    """Which broker a Kafka client command talks to: ``--bootstrap-server`` (or
    ``TABLETOPIC_BOOTSTRAP``), else the node's configuration as ``tabletopic serve`` reads it (the
    group's ``--data-dir``/``--override`` kept by ``cli_common.remember_node``, the environment, the
    endpoints the node last served on); exits with one line when nothing listens there, or when that
    listener asks for TLS or a login that the client ``settings`` do not give."""
    if bootstrap is None:
        data_dir, override = ctx.obj if isinstance(ctx.obj, tuple) else (None, None)
        listener = node_listener(load_config(data_dir, None, override))
        require_client_security(listener, settings)
        bootstrap = listener.address
    require_listening(
        bootstrap,
        "Kafka listener",
        "Point at the node with --bootstrap-server, TABLETOPIC_BOOTSTRAP or --override listeners=...",
    )
    return bootstrap


def require_client_security(listener: Endpoint, settings: Mapping[str, str]) -> None:
    """Exit with one line when the node's listener is SSL or SASL and the client settings name no
    ``security.protocol``: the broker closes a connection that skips TLS or the login, and the
    client would only say ``Broker transport failure`` after its timeout."""
    if listener.protocol is SecurityProtocol.PLAINTEXT or "security.protocol" in settings:
        return
    mapped = (
        f" (listener {listener.name} in listener.security.protocol.map)"
        if listener.name != listener.protocol
        else ""
    )
    example = " ".join(f"-X {item}" for item in _client_security_example(listener.protocol))
    err_console.print(
        f"[red]error:[/red] the Kafka listener at {escape(listener.address)} is {listener.protocol}"
        f"{mapped} and the client settings name no security.protocol: give them with --command-config "
        f"FILE or {example}, or point at a PLAINTEXT listener with --bootstrap-server",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(1)


def _client_security_example(protocol: SecurityProtocol) -> list[str]:
    """The client settings (librdkafka's keys) a listener of ``protocol`` asks for, values elided."""
    items = [f"security.protocol={protocol}"]
    if protocol.endswith("SSL"):
        items.append("ssl.ca.location=CA.pem")
    if protocol.startswith("SASL_"):
        items += ["sasl.mechanism=PLAIN", "sasl.username=...", "sasl.password=..."]
    return items


def logged_in_client_config(
    ctx: typer.Context, bootstrap: str | None, command_config: Path | None, x: list[str] | None
) -> dict[str, str]:
    """A Kafka client's configuration for the node: its settings (``cli_common.client_settings``) and
    ``bootstrap.servers`` (:func:`node_bootstrap`), once its login has been tried
    (:func:`require_login`): what every client command builds its clients from. The settings are
    read first, so a malformed ``-X`` is a usage error even when no node is running."""
    settings = client_settings(command_config, x)
    config = {**settings, "bootstrap.servers": node_bootstrap(ctx, bootstrap, settings)}
    require_login(config)
    if bootstrap is not None:  # found through the configuration, a secured listener is named already
        require_plaintext(config)
    return config


def require_login(config: Mapping[str, str]) -> None:
    """Exit with one line when the first reachable server of ``bootstrap.servers`` refuses the
    client's TLS handshake or SASL login. Settings this module cannot speak (another mechanism) and
    servers that cannot be reached are left to the Kafka client, which reports them itself."""
    protocol = config.get("security.protocol", "PLAINTEXT").upper()
    if protocol == "PLAINTEXT" or protocol not in PROTOCOLS:
        return
    if protocol.startswith("SASL_") and config.get("sasl.mechanism", "").upper() not in WIRE_SASL_MECHANISMS:
        return
    connect = wire_connect(config)
    for server, host, port in bootstrap_servers(config["bootstrap.servers"]):
        try:
            connect(host, port, LOGIN_CHECK_TIMEOUT_S).close()
            return
        except ssl.SSLError as exc:
            raise _refused(
                "TLS handshake", server, exc, " (check ssl.ca.location and the broker's certificate)"
            ) from exc
        except ConnectionRefusedError as exc:
            if exc.errno is None:  # the broker refused the login (nothing listening has ECONNREFUSED)
                raise _refused("login", server, exc) from exc
        except (OSError, ValueError):
            pass  # not reachable: try the next server


def require_plaintext(config: Mapping[str, str]) -> None:
    """Exit with one line when the client settings say PLAINTEXT (or nothing) and the first
    reachable server of ``bootstrap.servers`` does not answer a plaintext Metadata request: its
    listener wants TLS (the bytes are not a handshake) or a SASL login (it closes the connection).
    librdkafka would retry until the command's timeout and report ``Broker transport failure``.
    A server that cannot be reached, or accepts and does not answer (a stopped process), is left to
    the Kafka client, as in :func:`require_login`: neither says anything of its listener."""
    if config.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT":
        return
    for server, host, port in bootstrap_servers(config["bootstrap.servers"]):
        try:
            sock = plain_connect(host, port, LOGIN_CHECK_TIMEOUT_S)
        except (OSError, ValueError):
            continue  # not reachable: try the next server
        try:
            with sock:
                exchange(sock, METADATA, METADATA_VERSION, topics=[])
            return
        except TimeoutError:
            continue  # no answer in time: try the next server
        except (OSError, ValueError, struct.error) as exc:
            check = (
                " (its listener may want TLS or a SASL login: give security.protocol, with the"
                " ssl.* and sasl.* settings it needs, through --command-config or -X)"
            )
            reason = str(exc) or type(exc).__name__
            raise _refused("plaintext Kafka request", server, RuntimeError(reason), check) from exc


def _refused(what: str, server: str, exc: Exception, check: str = "") -> typer.Exit:
    """Print a refused handshake or login in one line; the exit to raise."""
    err_console.print(
        f"[red]error:[/red] the {what} at {escape(server)} failed: {escape(str(exc))}{check}",
        highlight=False,
        soft_wrap=True,
    )
    return typer.Exit(1)
