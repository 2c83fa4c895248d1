"""Configuration keys of the group coordinator, named and defaulted as Apache Kafka's.

Importing this module declares the keys; :func:`group_config` reads them into a
:class:`~tabletopic.broker.groups.model.GroupConfig` (falling back to the defaults for any key the
running configuration does not know, so the coordinator works before the broker imports this).
"""

from __future__ import annotations

from tabletopic.broker.groups.model import GroupConfig
from tabletopic.config import Config, define, in_range

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


def group_config(config: Config) -> GroupConfig:
    """The coordinator limits of a running configuration."""

    def get(key: str, default: int) -> int:
        try:
            return int(config.get(key))
        except KeyError:
            return default

    return GroupConfig(
        min_session_timeout_ms=get(MIN_SESSION_TIMEOUT.name, _DEFAULTS.min_session_timeout_ms),
        max_session_timeout_ms=get(MAX_SESSION_TIMEOUT.name, _DEFAULTS.max_session_timeout_ms),
        initial_rebalance_delay_ms=get(INITIAL_REBALANCE_DELAY.name, _DEFAULTS.initial_rebalance_delay_ms),
        max_size=get(MAX_SIZE.name, _DEFAULTS.max_size),
        offset_metadata_max_bytes=get(OFFSET_METADATA_MAX_BYTES.name, _DEFAULTS.offset_metadata_max_bytes),
        offsets_retention_ms=get(OFFSETS_RETENTION.name, _DEFAULTS.offsets_retention_ms // 60_000) * 60_000,
        offsets_retention_check_interval_ms=get(
            OFFSETS_RETENTION_CHECK_INTERVAL.name, _DEFAULTS.offsets_retention_check_interval_ms
        ),
    )
