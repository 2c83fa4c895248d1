"""Configuration keys of the group coordinator, named and defaulted as Apache Kafka's.

Importing this module declares the keys; :func:`group_config` reads them into a
:class:`~tabletopic.broker.groups.model.GroupConfig` (falling back to the defaults for any key the
running configuration does not know, so the coordinator works before the broker imports this).
"""

from __future__ import annotations

from dataclasses import dataclass

from tabletopic.broker.groups.assignors import assignor_name
from tabletopic.broker.groups.model import GroupConfig
from tabletopic.config import Config, ConfigKey, define, in_range

_DEFAULTS = GroupConfig()

MIN_SESSION_TIMEOUT = define(
    "group.min.session.timeout.ms",
    int,
    _DEFAULTS.min_session_timeout_ms,
    "Smallest session timeout a consumer may ask for (JoinGroup answers INVALID_SESSION_TIMEOUT).",
    "groups",
    in_range(1),
)
MAX_SESSION_TIMEOUT = define(
    "group.max.session.timeout.ms",
    int,
    _DEFAULTS.max_session_timeout_ms,
    "Largest session timeout a consumer may ask for.",
    "groups",
    in_range(1),
)
INITIAL_REBALANCE_DELAY = define(
    "group.initial.rebalance.delay.ms",
    int,
    _DEFAULTS.initial_rebalance_delay_ms,
    "How long the first rebalance of an empty group waits for more members (extended while members "
    "keep arriving, up to the rebalance timeout), so a starting fleet joins in one rebalance.",
    "groups",
    in_range(0),
)
MAX_SIZE = define(
    "group.max.size",
    int,
    _DEFAULTS.max_size,
    "Most members a classic group admits; JoinGroup of one more answers GROUP_MAX_SIZE_REACHED.",
    "groups",
    in_range(1),
)
OFFSET_METADATA_MAX_BYTES = define(
    "offset.metadata.max.bytes",
    int,
    _DEFAULTS.offset_metadata_max_bytes,
    "Longest metadata string an OffsetCommit may attach (OFFSET_METADATA_TOO_LARGE beyond).",
    "groups",
    in_range(0),
)

OFFSETS_RETENTION = define(
    "offsets.retention.minutes",
    int,
    _DEFAULTS.offsets_retention_ms // 60_000,
    "How long committed offsets outlive their group: all offsets of a group Empty this long, each "
    "offset of a simple committer not committed for this long.",
    "groups",
    in_range(1),
)
OFFSETS_RETENTION_CHECK_INTERVAL = define(
    "offsets.retention.check.interval.ms",
    int,
    _DEFAULTS.offsets_retention_check_interval_ms,
    "How often expired offsets are looked for.",
    "groups",
    in_range(1),
)


@dataclass(frozen=True, slots=True)
class GroupSettings:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1


_CONSUMER = GroupSettings()


def _check_assignors(value: object) -> None:
    names = _names(value)
    if not names:
        raise ValueError("must name at least one assignor")
    unknown = [n for n in names if assignor_name(n) is None]
    if unknown:
        raise ValueError(f"unknown assignor(s) {', '.join(unknown)}: the served ones are uniform, range")


def _names(value: object) -> list[str]:
    parts = value if isinstance(value, list) else str(value).split(",")
    return [str(n).strip() for n in parts if str(n).strip()]


CONSUMER_SESSION_TIMEOUT = define(
    "group.consumer.session.timeout.ms",
    int,
    _CONSUMER.session_timeout_ms,
    "KIP-848 consumer groups: how long a member may go without a heartbeat before it is fenced and its "
    "partitions go to the others (set by the broker, not the client, in this protocol).",
    "groups",
    in_range(1),
)
CONSUMER_HEARTBEAT_INTERVAL = define(
    "group.consumer.heartbeat.interval.ms",
    int,
    _CONSUMER.heartbeat_interval_ms,
    "KIP-848 consumer groups: how often members heartbeat (sent to them in every heartbeat answer); "
    "a new assignment reaches a member within this interval.",
    "groups",
    in_range(1),
)
CONSUMER_ASSIGNORS = define(
    "group.consumer.assignors",
    list,
    list(_CONSUMER.assignors),
    "KIP-848 consumer groups: the server-side assignors served, comma-separated (uniform, range, or "
    "Kafka's assignor class names); the first is used when members name none.",
    "groups",
    _check_assignors,
)
CONSUMER_MAX_SIZE = define(
    "group.consumer.max.size",
    int,
    _CONSUMER.max_size,
    "KIP-848 consumer groups: most members a group admits (GROUP_MAX_SIZE_REACHED beyond).",
    "groups",
    in_range(1),
)


def configured_int(config: Config, key: ConfigKey[int]) -> int:
    """An int key of a running configuration; the key's own default where the configuration does
    not know it (a coordinator built before the broker imported the key's module)."""
    try:
        return int(str(config.get(key.name)))
    except KeyError:
        return key.default


def consumer_group_settings(config: Config) -> GroupSettings:
    """The ``group.consumer.*`` settings of a running configuration (defaults for unknown keys)."""
    try:
        raw = config.get(CONSUMER_ASSIGNORS.name)
    except KeyError:
        raw = CONSUMER_ASSIGNORS.default
    names = tuple(name for n in _names(raw) if (name := assignor_name(n)) is not None)
    return GroupSettings(
        session_timeout_ms=configured_int(config, CONSUMER_SESSION_TIMEOUT),
        heartbeat_interval_ms=configured_int(config, CONSUMER_HEARTBEAT_INTERVAL),
        assignors=names or _CONSUMER.assignors,
        max_size=configured_int(config, CONSUMER_MAX_SIZE),
    )


def group_config(config: Config) -> GroupConfig:
    """The coordinator limits of a running configuration."""
    return GroupConfig(
        min_session_timeout_ms=configured_int(config, MIN_SESSION_TIMEOUT),
        max_session_timeout_ms=configured_int(config, MAX_SESSION_TIMEOUT),
        initial_rebalance_delay_ms=configured_int(config, INITIAL_REBALANCE_DELAY),
        max_size=configured_int(config, MAX_SIZE),
        offset_metadata_max_bytes=configured_int(config, OFFSET_METADATA_MAX_BYTES),
        offsets_retention_ms=configured_int(config, OFFSETS_RETENTION) * 60_000,
        offsets_retention_check_interval_ms=configured_int(config, OFFSETS_RETENTION_CHECK_INTERVAL),
    )
