"""Configuration keys of KIP-932 share groups, named and defaulted as Apache Kafka's
(``group.share.*``); :func:`share_group_settings` reads them into :class:`ShareSettings`."""

from __future__ import annotations

from dataclasses import dataclass

from tabletopic.broker.groups.settings import configured_int
from tabletopic.config import Config, define, in_range


@dataclass(frozen=True, slots=True)
class ShareSettings:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_size: int = 200


_SHARE = ShareSettings()

SHARE_HEARTBEAT_INTERVAL = define(
    "group.share.heartbeat.interval.ms",
    int,
    _SHARE.heartbeat_interval_ms,
    "Share groups (KIP-932): how often members heartbeat (sent to them in every heartbeat answer).",
    "groups",
    in_range(1),
)
SHARE_SESSION_TIMEOUT = define(
    "group.share.session.timeout.ms",
    int,
    _SHARE.session_timeout_ms,
    "Share groups: how long a member may go without a heartbeat before it is removed and the records "
    "it holds become available to the others.",
    "groups",
    in_range(1),
)
SHARE_RECORD_LOCK_DURATION = define(
    "group.share.record.lock.duration.ms",
    int,
    _SHARE.record_lock_duration_ms,
    "Share groups: how long a delivered record stays locked to its member; not acknowledged by then, "
    "it is released for redelivery (or archived at the delivery count limit).",
    "groups",
    in_range(1),
)
SHARE_DELIVERY_COUNT_LIMIT = define(
    "group.share.delivery.count.limit",
    int,
    _SHARE.delivery_count_limit,
    "Share groups: a record released (or whose lock ran out) after this many deliveries is archived "
    "instead of delivered again, so a poison record cannot loop forever.",
    "groups",
    in_range(2),
)
SHARE_PARTITION_MAX_RECORD_LOCKS = define(
    "group.share.partition.max.record.locks",
    int,
    _SHARE.partition_max_record_locks,
    "Share groups: most records of one share-partition in flight at once (bounds its memory and "
    "the state written per acknowledgement).",
    "groups",
    in_range(100),
)
SHARE_MAX_SIZE = define(
    "group.share.max.size",
    int,
    _SHARE.max_size,
    "Share groups: most members a share group admits (GROUP_MAX_SIZE_REACHED beyond).",
    "groups",
    in_range(1),
)


def share_group_settings(config: Config) -> ShareSettings:
    """The ``group.share.*`` settings of a running configuration (defaults for unknown keys)."""
    return ShareSettings(
        heartbeat_interval_ms=configured_int(config, SHARE_HEARTBEAT_INTERVAL),
        session_timeout_ms=configured_int(config, SHARE_SESSION_TIMEOUT),
        record_lock_duration_ms=configured_int(config, SHARE_RECORD_LOCK_DURATION),
        delivery_count_limit=configured_int(config, SHARE_DELIVERY_COUNT_LIMIT),
        partition_max_record_locks=configured_int(config, SHARE_PARTITION_MAX_RECORD_LOCKS),
        max_size=configured_int(config, SHARE_MAX_SIZE),
    )
