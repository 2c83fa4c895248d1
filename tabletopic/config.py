"""Server configuration the Kafka way: a ``server.properties`` file, ``TABLETOPIC_*`` environment
variables and ``--override key=value`` flags, in rising order of precedence.

Every key is declared once with :func:`define` next to the code that reads it (each subpackage has a
``settings.py``), so the documentation (``tabletopic config docs`` / ``docs/configuration.md``) is
generated from the same table the server validates against and can never drift.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, overload
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

ENV_PREFIX = "TABLETOPIC_"

# Modules whose import declares their keys; kept in one place so ``Config.load`` and the docs see all.
SETTINGS_MODULES = (
    "tabletopic.settings",
    "tabletopic.s3stream.settings",
    "tabletopic.cluster.settings",
    "tabletopic.broker.settings",
    "tabletopic.broker.kafka_settings",
    "tabletopic.broker.transactions.settings",
    "tabletopic.broker.security.settings",
    "tabletopic.broker.groups.settings",
    "tabletopic.broker.groups.share_settings",
    "tabletopic.schema_registry.settings",
    "tabletopic.catalog.settings",
    "tabletopic.spark.settings",
    "tabletopic.table.settings",
    "tabletopic.api.settings",
    # Last: declares the Kafka broker keys no module above declared (see the module).
    "tabletopic.broker.kafka_broker_keys",
)


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range; the message names the key."""


#: The exit code of a broker that left the cluster for good (``sysexits.h``'s EX_TEMPFAIL: try
#: again): a supervisor that restarts it on failure (systemd, Kubernetes, ``tabletopic cluster up``)
#: has it join again as a new incarnation.
EXIT_REJOIN = 75


class LeftCluster(RuntimeError):
    """This broker's incarnation is out of the cluster for good: its shared WAL was taken over while
    it was paused or cut off past its lease, or failed a write (its partitions were handed over
    first), or a newer incarnation registered with its id. It may acknowledge nothing more, so the
    node ends; started again, it joins as a new incarnation."""


class StartupError(RuntimeError):
    """A part of a node cannot start for a reason the user fixes in the configuration or around it (a
    busy port, a bucket that does not exist, wrong credentials, an unreachable database). The message
    is one or two lines naming the key to change; ``tabletopic serve`` prints it without a traceback.

    Args:
        message: what is wrong and which key to change.
        key: the configuration key to change, when there is one.
    """

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class ConfigKey(Generic[T_co]):
    """One documented configuration key whose value is a ``T``.

    ``type`` is one of ``str``, ``int``, ``float``, ``bool`` or ``list`` (comma separated); ``T`` is
    that type, or that type or None when the key has no default, so ``config.get(KEY)`` is typed
    for mypy as what the key holds. A key whose name ends in ``.*`` is a prefix: every key under it
    is accepted and passed through as a string (used for catalog properties handed to pyiceberg and
    Spark untouched).
    """

    name: str
    type: type[Any]
    default: T_co
    doc: str
    group: str
    validator: Callable[[Any], None] | None = None

    @property
    def is_prefix(self) -> bool:
        return self.name.endswith(".*")

    @property
    def env_name(self) -> str:
        return env_name(self.name)

    def parse(self, raw: Any) -> T_co:
        value: T_co = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            try:
                self.validator(value)
            except ConfigError:
                raise
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"invalid value {raw!r} for {self.name}: {exc}") from exc
        return value


REGISTRY: dict[str, ConfigKey[Any]] = {}


@overload
def define(
    name: str,
    type_: type[list[Any]],
    default: None,
    doc: str,
    group: str,
    validator: Callable[[Any], None] | None = None,
) -> ConfigKey[list[str] | None]: ...


@overload
def define(
    name: str,
    type_: type[list[Any]],
    default: list[str],
    doc: str,
    group: str,
    validator: Callable[[Any], None] | None = None,
) -> ConfigKey[list[str]]: ...


@overload
def define(
    name: str,
    type_: type[T],
    default: None,
    doc: str,
    group: str,
    validator: Callable[[Any], None] | None = None,
) -> ConfigKey[T | None]: ...


@overload
def define(
    name: str,
    type_: type[T],
    default: T,
    doc: str,
    group: str,
    validator: Callable[[Any], None] | None = None,
) -> ConfigKey[T]: ...


def define(
    name: str,
    type_: type[Any],
    default: Any,
    doc: str,
    group: str,
    validator: Callable[[Any], None] | None = None,
) -> ConfigKey[Any]:
    """Declare a key; the key is typed by ``type_`` (or ``type_ | None`` without a default; a
    ``list`` key holds strings). Declaring the same name twice is a programming error."""
    if name in REGISTRY:
        raise RuntimeError(f"config key {name} declared twice")
    key: ConfigKey[Any] = ConfigKey(name, type_, default, doc, group, validator)
    REGISTRY[name] = key
    return key


def env_name(key: str) -> str:
    """``log.dirs`` -> ``TABLETOPIC_LOG_DIRS`` (dots and dashes become underscores)."""
    return ENV_PREFIX + re.sub(r"[.\-]", "_", key).upper()


def parse_value(name: str, type_: type, raw: Any) -> Any:
    if raw is None:
        return None
    if type_ is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{name} must be true or false, not {raw!r}")
    if type_ is int:
        try:
            return int(str(raw).strip())
        except ValueError as exc:
            raise ConfigError(f"{name} must be an integer, not {raw!r}") from exc
    if type_ is float:
        try:
            return float(str(raw).strip())
        except ValueError as exc:
            raise ConfigError(f"{name} must be a number, not {raw!r}") from exc
    if type_ is list:
        if isinstance(raw, list):
            return raw
        return [part.strip() for part in str(raw).split(",") if part.strip()]
    return str(raw)


def in_range(low: float | None = None, high: float | None = None) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if low is not None and value < low:
            raise ValueError(f"must be at least {low}")
        if high is not None and value > high:
            raise ValueError(f"must be at most {high}")

    return check


def one_of(*choices: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")

    return check


def http_url(value: Any) -> None:
    """A URL others open: http or https, with a host."""
    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")


def load_all_settings() -> None:
    """Import every settings module so :data:`REGISTRY` is complete."""
    for module in SETTINGS_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            # A subpackage that has not declared keys yet simply contributes none.
            if exc.name != module:
                raise


def edit_distance(a: str, b: str) -> int:
    """Letters inserted, deleted, replaced or swapped with a neighbour to turn ``a`` into ``b``
    (optimal string alignment distance)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, char_b in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def nearest_name(name: str, known: Iterable[str], max_distance: int = 2) -> str | None:
    """The known name a misspelt ``name`` most likely meant (``log.levle`` -> ``log.level``): the
    closest within ``max_distance`` edits, else None (a different name, not a typo)."""
    best: tuple[int, str] | None = None
    for candidate in known:
        distance = edit_distance(name, candidate)
        if distance <= max_distance and (best is None or (distance, candidate) < best):
            best = (distance, candidate)
    return None if best is None else best[1]


def read_properties(path: Path) -> dict[str, str]:
    """Parse a Java-style properties file: ``key=value`` or ``key: value``, ``#``/``!`` comments,
    trailing-backslash line continuations."""
    values: dict[str, str] = {}
    pending = ""
    for lineno, raw_line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = pending + raw_line.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            if "=" not in line and ":" not in line and " " not in line:
                values[line] = ""
                continue
            raise ConfigError(f"{path}:{lineno}: cannot parse {raw_line!r}")
        values[match.group(1)] = match.group(2)
    return values


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        values[key.strip()] = value.strip()
    return values


class Config:
    """Resolved, typed configuration. Unknown keys are kept (and warned about once) so a user can
    move a Kafka ``server.properties`` over without editing it first; an unknown key within two
    typing slips of a known one (``log.levle``) is a typo and refused, naming the key meant.

    Raises:
        ConfigError: a value that does not parse, or a misspelt key (the message names both).
    """

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        load_all_settings()
        self._raw: dict[str, Any] = dict(values or {})
        self._values: dict[str, Any] = {}
        for name, raw in self._raw.items():
            key = self.lookup(name)
            if key is None:
                meant = nearest_name(name, (k.name for k in REGISTRY.values() if not k.is_prefix))
                if meant is not None:
                    raise ConfigError(f"unknown configuration key {name}: did you mean {meant}?")
                log.warning("ignoring unknown configuration key %s", name)
                continue
            self._values[name] = raw if key.is_prefix else key.parse(raw)

    @staticmethod
    def lookup(name: str) -> ConfigKey[Any] | None:
        if name in REGISTRY:
            return REGISTRY[name]
        for key in REGISTRY.values():
            if key.is_prefix and name.startswith(key.name[:-1]):
                return key
        return None

    @classmethod
    def load(
        cls,
        config_file: Path | None = None,
        overrides: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
        data_dir: Path | None = None,
    ) -> Config:
        load_all_settings()
        values: dict[str, Any] = {}
        if config_file is not None:
            if not config_file.exists():
                raise ConfigError(f"config file {config_file} does not exist")
            values.update(read_properties(config_file))
        env = os.environ if environ is None else environ
        for key in REGISTRY.values():
            if not key.is_prefix and key.env_name in env:
                values[key.name] = env[key.env_name]
        values.update(parse_overrides(overrides))
        if data_dir is not None:
            values["data.dir"] = str(data_dir)
        return cls(values)

    @overload
    def get(self, key: ConfigKey[T]) -> T: ...

    @overload
    def get(self, key: str) -> Any: ...

    def get(self, key: str | ConfigKey[Any]) -> Any:
        """The key's value: set explicitly, else its default. A :class:`ConfigKey` gives the value
        its declared type; a name (for keys only known at run time) gives ``Any``.

        Raises:
            KeyError: a name no settings module declares.
        """
        name = key.name if isinstance(key, ConfigKey) else key
        if name in self._values:
            return self._values[name]
        definition = REGISTRY.get(name)
        if definition is None:
            raise KeyError(f"undeclared configuration key {name}")
        return definition.default

    def with_overrides(self, **values: Any) -> Config:
        """A copy with some keys replaced (keys given with dots replaced by ``__``)."""
        merged = dict(self._raw)
        merged.update({k.replace("__", "."): v for k, v in values.items()})
        return Config(merged)

    def prefixed(self, prefix: str) -> dict[str, str]:
        """Every explicitly set key under ``prefix`` with the prefix stripped."""
        return {
            name[len(prefix) :]: str(value)
            for name, value in self._raw.items()
            if name.startswith(prefix) and name != prefix
        }

    def as_dict(self) -> dict[str, Any]:
        result = {k.name: k.default for k in REGISTRY.values() if not k.is_prefix}
        result.update(self._values)
        return result

    @property
    def data_dir(self) -> Path:
        return Path(self.get("data.dir")).expanduser().resolve()


def format_value(value: Any) -> str:
    """A value as a properties file spells it: ``true``/``false``, lists comma-separated, unset empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(format_value(v) for v in value)
    return str(value)


def render_docs() -> str:
    """Markdown documentation of every key, grouped by subsystem."""
    load_all_settings()
    groups: dict[str, list[ConfigKey[Any]]] = {}
    for key in REGISTRY.values():
        groups.setdefault(key.group, []).append(key)
    lines = [
        "# Configuration reference",
        "",
        "Generated by `tabletopic config docs`. Keys come from a `server.properties`-style file",
        "(`--config FILE`), from `TABLETOPIC_<KEY>` environment variables (dots and dashes become",
        "underscores, upper case: `log.dirs` -> `TABLETOPIC_LOG_DIRS`) and from `--override key=value`,",
        "in rising order of precedence.",
        "",
    ]
    for group in sorted(groups):
        lines += [f"## {group}", "", "| key | type | default | description |", "|---|---|---|---|"]
        for key in sorted(groups[group], key=lambda k: k.name):
            default = "" if key.default is None else key.default
            if isinstance(default, list):
                default = ",".join(default)
            doc = key.doc.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{key.name}` | {key.type.__name__} | `{default}` | {doc} |")
        lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ where a node serves
# `tabletopic serve` records the addresses it serves on in its data directory, so client commands given
# the same data directory (``tabletopic topics -d DIR``, or run from the same place) reach a node whose
# ports were moved without repeating every listener setting.
ENDPOINTS_FILE = "endpoints.properties"
# A node's data directory when none is named (``data.dir``'s default).
DEFAULT_DATA_DIR = "./data"
# Where `tabletopic cluster up` keeps everything by default; it writes the first broker's endpoints
# there too, so client commands run beside it find the cluster when it started after the node of the
# default data directory, or no node served from there.
DEFAULT_CLUSTER_DIR = Path("cluster-data")
ENDPOINT_KEYS = (
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "admin.listener",
    "schema.registry.listener",
    "catalog.listener",
)


# Everything a node keeps in its data directory (the metadata database with its SCRAM credentials,
# the WAL, table data) is its own: the directory is 0700, and ``tabletopic serve`` runs with umask
# 077 so files it creates there are 0600 whatever the user's umask.
NODE_UMASK = 0o077


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) as 0700, or narrow it to 0700 if it exists open to others."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        try:
            path.chmod(0o700)
        except OSError as exc:  # not ours to change: say so, the node still runs
            log.warning("data directory %s is mode %o and could not be made 0700: %s", path, mode, exc)


def write_endpoints(config: Config) -> Path:
    """Write :data:`ENDPOINTS_FILE` (addresses only, no secrets) into the node's data directory."""
    lines = [
        "# Written by `tabletopic serve` at start: where this node serves. Client commands run with the",
        "# same data directory read it.",
    ]
    for key in ENDPOINT_KEYS:
        value = config.get(key)
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        if value:
            lines.append(f"{key}={value}")
    path = config.data_dir / ENDPOINTS_FILE
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
