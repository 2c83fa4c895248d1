"""Options and helpers shared by every CLI command (kept apart from ``cli.py`` so subcommand modules
can import them without a cycle). Subcommand modules keep heavy imports (pyspark, pyiceberg) inside
their functions so ``tabletopic --help`` stays fast."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from tabletopic.config import (
    DEFAULT_CLUSTER_DIR,
    DEFAULT_DATA_DIR,
    ENDPOINT_KEYS,
    ENDPOINTS_FILE,
    Config,
    ConfigError,
    env_name,
    parse_overrides,
    read_properties,
)

if TYPE_CHECKING:
    from rich.table import Table

console = Console()
err_console = Console(stderr=True)
# Piped or redirected output is never wrapped or cut to a made-up width (rich assumes 80 columns).
console.soft_wrap = not console.is_terminal
err_console.soft_wrap = not err_console.is_terminal


def print_table(table: Table) -> None:
    """A rich table on a terminal; piped or redirected, plain tab-separated lines (a header line,
    then one line per row) that never truncate a name and that ``cut``/``awk`` read."""
    if console.is_terminal:
        console.print(table)
        return
    columns = table.columns
    lines = ["\t".join(str(c.header) for c in columns)]
    for row in zip(*(list(c.cells) for c in columns), strict=True):
        lines.append("\t".join(str(cell) for cell in row))
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def quiet_library_warnings() -> None:
    """Keep third-party deprecation chatter (authlib's, pyspark's) out of CLI output: it says nothing
    the user can act on. ``-W`` / ``PYTHONWARNINGS`` still override this."""
    if not sys.warnoptions:
        try:  # authlib adds an "always" filter for its warnings when imported: ours must come after it
            importlib.import_module("authlib.deprecate")
        except ImportError:
            pass
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", module="authlib")
        warnings.filterwarnings("ignore", module="pyspark")


DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", "-d", help="Node data directory (default: data.dir, ./data)."),
]
ConfigFileOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="A server.properties-style file."),
]
OverrideOption = Annotated[
    list[str] | None,
    typer.Option("--override", "-o", help="key=value, repeatable; wins over file and environment."),
]


def load_config(
    data_dir: Path | None,
    config_file: Path | None,
    overrides: list[str] | None,
    endpoints: bool = True,
) -> Config:
    """The configuration as ``tabletopic serve`` reads it. With ``endpoints`` (client commands), the
    addresses a node last served on from this data directory fill in the listener keys that the file,
    the environment and the overrides leave unset. Where no data directory is named (the default
    ``./data``), the first broker of a ``tabletopic cluster up`` run from here (``./cluster-data``)
    serves instead when it started later than that node, or that node never served: after ``make
    serve``, stopped, and ``make cluster``, the commands find the cluster, not the stopped node."""
    try:
        cfg = Config.load(config_file=config_file, overrides=overrides or [], data_dir=data_dir)
        served = cfg.data_dir / ENDPOINTS_FILE
        if data_dir is None and cfg.data_dir == Path(DEFAULT_DATA_DIR).resolve():
            served = _started_last(served, DEFAULT_CLUSTER_DIR / ENDPOINTS_FILE)
        if not endpoints or not served.exists():
            return cfg
        explicit = set(parse_overrides(overrides or []))
        explicit |= set(read_properties(config_file)) if config_file is not None else set()
        explicit |= {key for key in ENDPOINT_KEYS if env_name(key) in os.environ}
        known = [
            f"{k}={v}" for k, v in read_properties(served).items() if k in ENDPOINT_KEYS and k not in explicit
        ]
        return Config.load(config_file=config_file, overrides=[*known, *(overrides or [])], data_dir=data_dir)
    except ConfigError as exc:
        raise config_refused(exc) from exc


def config_refused(exc: ConfigError) -> typer.Exit:
    """Print a configuration error (its message names the key) and give the exit to raise: ``raise
    config_refused(exc) from exc``. For what a command reads of the configuration after
    :func:`load_config`, such as the listeners a client command looks for the node at."""
    err_console.print(f"[red]configuration error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _started_last(node: Path, cluster: Path) -> Path:
    """Of a node's and a cluster's endpoints files, the one written last (each is written as its
    node or first broker starts)."""
    if not cluster.exists():
        return node
    if not node.exists():
        return cluster
    return cluster if cluster.stat().st_mtime > node.stat().st_mtime else node


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )
    # Third-party chatter that says nothing a user can act on (httpx: a line per request a broker
    # forwards to another's admin API).
    for noisy in ("py4j", "botocore", "urllib3", "uvicorn.error", "aiokafka", "kafka", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


AdminOption = Annotated[
    str | None, typer.Option("--admin-url", help="Admin API of the node (default: admin.listener).")
]


def admin_node(
    ctx: typer.Context,
    admin_url: AdminOption = None,
    data_dir: DataDirOption = None,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Where the node's admin API is: ``--admin-url``, or ``admin.listener`` of the node's config
    (``ctx.obj``); the config itself in ``ctx.meta["tabletopic.config"]``, for the commands that
    also reach Kafka and the catalog. The options callback of the commands that use the admin API."""
    cfg = load_config(data_dir, config, override)
    ctx.meta["tabletopic.config"] = cfg
    ctx.obj = admin_url or cfg.get("admin.listener")


def ago(epoch: float | None, never: str = "never") -> str:
    """How long ago ``epoch`` (seconds) was, in the unit a reader takes in: seconds up to two
    minutes, then minutes up to two hours, then hours; ``never`` when there was no such moment.
    The console and the command line say it alike."""
    if not epoch:
        return never
    seconds = max(time.time() - epoch, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def columns(rows: list[list[str]], right: set[int] | None = None, plain: bool = False) -> list[str]:
    """Rows as aligned columns (the first row is the header; the columns in ``right``, figures,
    flush right), or tab-separated when ``plain`` (piped into another program)."""
    if plain:
        return ["\t".join(row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    flush_right = right or set()
    return [
        "  ".join(
            cell.rjust(widths[i]) if i in flush_right else cell.ljust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]


def or_dash(value: object) -> str:
    """A figure in a table, or ``-`` where the node had none to give (``null`` in its answer)."""
    return "-" if value is None else str(value)


# The user client commands log in as where a node's HTTP services ask for one
# (authentication.method=BASIC): a SASL user of the node, as for any HTTP client of it.
HTTP_USER_ENV = "TABLETOPIC_HTTP_USER"
HTTP_PASSWORD_ENV = "TABLETOPIC_HTTP_PASSWORD"


def http_login() -> tuple[str, str] | None:
    """HTTP Basic credentials from :data:`HTTP_USER_ENV` and :data:`HTTP_PASSWORD_ENV`, if set (a URL
    with ``user:password@`` works too: httpx sends what it holds)."""
    user = os.environ.get(HTTP_USER_ENV)
    return (user, os.environ.get(HTTP_PASSWORD_ENV, "")) if user else None


def http_login_refused(url: str) -> typer.Exit:
    """Print why a node's HTTP service at ``url`` answered 401 and what to set; the exit to raise."""
    login = http_login()
    if login is None:
        advice = (
            f"it asks for a login (authentication.method=BASIC): set {HTTP_USER_ENV} and "
            f"{HTTP_PASSWORD_ENV} to a user of the node (sasl.plain.users or a SCRAM user)"
        )
    else:
        advice = f"it refused the login as {login[0]}: check {HTTP_USER_ENV} and {HTTP_PASSWORD_ENV}"
    err_console.print(f"[red]error:[/red] {escape(url)}: {advice}", highlight=False, soft_wrap=True)
    return typer.Exit(1)


def admin_call(url: str, path: str, method: str = "GET", body: Any = None) -> Any:
    """``method path`` on a node's admin API, its JSON answer; a refusal or an unreachable node is
    printed (the node's own words) and ends the command with exit code 1."""
    import httpx

    try:
        response = httpx.request(method, url.rstrip("/") + path, json=body, timeout=30, auth=http_login())
    except httpx.HTTPError as exc:
        untrusted = "CERTIFICATE_VERIFY_FAILED" in str(exc)
        hint = (
            "set SSL_CERT_FILE to the CA file that signed the node's certificate"
            if untrusted
            else "is `tabletopic serve` running?"
        )
        err_console.print(
            f"[red]cannot reach the admin API at {escape(url)}:[/red] {escape(str(exc))} ({hint})",
            soft_wrap=True,
        )
        raise typer.Exit(1) from exc
    if response.status_code == 401:
        raise http_login_refused(url)
    if response.status_code >= 400:
        try:
            answer = response.json()
            detail = answer.get("detail") or answer.get("message") or response.text
        except ValueError:
            detail = response.text or response.reason_phrase
        err_console.print(f"[red]{escape(str(detail))}[/red]", soft_wrap=True)
        raise typer.Exit(1)
    return response.json()


# ------------------------------------------------------------------------------ finding the node
# Every client command finds the node the same way: its own flag (--bootstrap-server, --admin-url),
# else the node's configuration as `tabletopic serve` reads it (--data-dir/--config/--override, the
# TABLETOPIC_* environment, server.properties), so moving a port is one setting, not a flag per call.


BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        "-b",
        envvar="TABLETOPIC_BOOTSTRAP",
        help="host:port of a broker (default: the node's first PLAINTEXT listener, else its first "
        "listener, as -d/--override/TABLETOPIC_* and the node's endpoints.properties set it).",
    ),
]


def remember_node(
    ctx: typer.Context, data_dir: DataDirOption = None, override: OverrideOption = None
) -> None:
    """Keep a command group's ``--data-dir``/``--override`` for the broker's ``node_bootstrap``
    (``broker/security/client_login.py``): which node a client command talks to when
    ``--bootstrap-server`` names none. The options callback of the Kafka client command groups
    (``topics``, ``partitions``, ``users``)."""
    ctx.obj = (data_dir, override)


CommandConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        exists=True,
        dir_okay=False,
        help="Properties file with the client's security settings (security.protocol, sasl.*, ssl.*), "
        "as Kafka's tools take it.",
    ),
]
ClientOption = Annotated[
    list[str] | None,
    typer.Option(
        "-X",
        help="Client setting key=value (security.protocol, sasl.*, ssl.*), repeatable; wins over "
        "--command-config.",
    ),
]


def key_value_pairs(items: list[str] | None, option: str) -> dict[str, str]:
    """``key=value`` items of a repeatable ``option`` as a dict (a later key wins); an item without
    ``=`` is a usage error that names the option and the item."""
    pairs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"{option} expects key=value, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def client_settings(command_config: Path | None, x: list[str] | None) -> dict[str, str]:
    """A Kafka client's own settings (librdkafka's keys): the ``--command-config`` file, with the
    ``-X key=value`` items over it (kcat's way of adding one setting to a file's)."""
    from_file = read_properties(command_config) if command_config is not None else {}
    return {**from_file, **key_value_pairs(x, "-X")}


def client_error(exc: BaseException) -> str:
    """A Kafka client's error in words: the broker's message and the error's name
    (``Topic 'x' already exists. (TOPIC_ALREADY_EXISTS)``), not confluent-kafka's
    ``KafkaError{code=...,val=36,str="..."}``."""
    error = exc.args[0] if exc.args else None
    describe = getattr(error, "str", None)
    name = getattr(error, "name", None)
    if callable(describe) and callable(name):
        text, code = str(describe()).strip(), str(name())
        if not text or text.upper() == code or text.lower() == code.replace("_", " ").lower():
            return code.replace("_", " ").lower()
        return f"{text} ({code})"
    return str(exc)


def client_failure(exc: BaseException) -> typer.Exit:
    """Print a Kafka client's error in words (:func:`client_error`) and give the exit to raise:
    ``raise client_failure(exc) from exc``."""
    err_console.print(f"[red]error:[/red] {escape(client_error(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(1)


def require_listening(host_port: str, what: str, hint: str, timeout: float = 2.0) -> None:
    """Exit with one line when nothing accepts connections at ``host_port``, instead of letting a
    client library retry for half a minute and log every attempt. ``host_port`` may be a
    comma-separated list, as Kafka's ``--bootstrap-server`` takes: one address that answers is enough."""
    import socket

    addresses = [a.strip() for a in host_port.split(",") if a.strip()] or [host_port]
    reasons = []
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout):
                return
        except ValueError:
            err_console.print(
                f"[red]error:[/red] {what} address {address!r} is not host:port",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(1) from None
        except OSError as exc:
            reasons.append(exc.strerror or type(exc).__name__)
    reason, where = "; ".join(dict.fromkeys(reasons)), ", ".join(addresses)
    err_console.print(
        f"[red]error:[/red] no {what} at {where} ({reason}); is `tabletopic serve` running? {hint}",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(1)


def hoist_group_options(argv: list[str], groups: dict[str, set[str]]) -> list[str]:
    """Let a command group's own options (``tables --admin-url URL list``) also come after its
    subcommand (``tables list --admin-url URL``), as users type them: such options are moved back to
    just after the group's name. ``groups`` maps a group to its option names that take a value."""
    if len(argv) < 3 or argv[1] not in groups:
        return argv
    takes_value = groups[argv[1]]
    head, rest = argv[:2], argv[2:]
    # Options already before the subcommand stay; find the subcommand (first non-option word).
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        i += 2 if rest[i] in takes_value else 1
    hoisted: list[str] = []
    kept = rest[: i + 1]
    j = i + 1
    while j < len(rest):
        word = rest[j]
        name = word.split("=", 1)[0]
        if word == "--":
            kept += rest[j:]
            break
        if name in takes_value:
            if "=" in word:
                hoisted.append(word)
                j += 1
            else:
                hoisted += rest[j : j + 2]
                j += 2
            continue
        kept.append(word)
        j += 1
    return head + hoisted + kept
