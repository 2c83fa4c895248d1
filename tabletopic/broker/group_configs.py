"""Group config resources (KIP-848, DescribeConfigs / AlterConfigs resource type GROUP = 32).

Kafka lets an operator override, per group, the session and heartbeat intervals of the new consumer
protocol and the share-group settings. These keys are validated with Kafka's rules, stored in the
metadata database and reported back; only ``share.auto.offset.reset`` takes effect (where a new
share-partition starts), the others change nothing and DescribeConfigs' documentation says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tabletopic.broker.protocol.responses import DescribeConfigsResourceResult
from tabletopic.broker.topic_config_keys import InvalidTopicConfig, choice, int_range

RESOURCE_GROUP = 32
SOURCE_GROUP_CONFIG = 8
_STATE_PREFIX = "groupconfig."
_NOTE = "Kafka group key, accepted and reported for compatibility; no effect here: {}."
_CLASSIC = _NOTE.format(
    "tabletopic's groups use the classic protocol, whose members choose their own timeouts"
)
_SHARE = _NOTE.format("share groups take it from the broker's group.share.* keys")
_EFFECTIVE = "Kafka group key: where a share group's partitions start when first fetched."


class InvalidGroupConfig(ValueError):
    """A group config key is unknown or its value is invalid; the message names the key."""


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    name: str
    default: str
    validate: Callable[[str], None]
    config_type: int  # DescribeConfigs type code: 3 INT, 2 STRING
    documentation: str  # what DescribeConfigs says the key does (most: that it does nothing here)


# Defaults and bounds are Kafka 4's broker defaults (group.consumer.min.session.timeout.ms, ...).
_KEYS = [
    GroupConfigKey("consumer.session.timeout.ms", "45000", int_range(45_000, 60_000), 3, _CLASSIC),
    GroupConfigKey("consumer.heartbeat.interval.ms", "5000", int_range(5_000, 15_000), 3, _CLASSIC),
    GroupConfigKey("share.session.timeout.ms", "45000", int_range(45_000, 60_000), 3, _SHARE),
    GroupConfigKey("share.heartbeat.interval.ms", "5000", int_range(5_000, 15_000), 3, _SHARE),
    GroupConfigKey("share.record.lock.duration.ms", "30000", int_range(15_000, 60_000), 3, _SHARE),
    GroupConfigKey(
        "share.auto.offset.reset", "latest", choice("latest", "earliest", "by_duration"), 2, _EFFECTIVE
    ),
    GroupConfigKey(
        "share.isolation.level", "read_uncommitted", choice("read_uncommitted", "read_committed"), 2, _SHARE
    ),
]
GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {key.name: key for key in _KEYS}


def validate_group_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check a group's complete explicit config set with Kafka's bounds (which keep every heartbeat
    interval below every session timeout); return it. Raises InvalidGroupConfig naming the key."""
    result: dict[str, str] = {}
    for name, value in configs.items():
        key = GROUP_CONFIG_KEYS.get(name)
        if key is None:
            raise InvalidGroupConfig(f"unknown group config {name}")
        if value is None:
            raise InvalidGroupConfig(f"config {name} has a null value")
        try:
            key.validate(value)
        except InvalidTopicConfig as exc:  # the value checks are the topic configs'
            raise InvalidGroupConfig(f"invalid value for {name}: {exc}") from None
        result[name] = value
    return result


def state_prefix(group_id: str) -> str:
    """Where a group's configs live among the broker's state items (length-prefixed: group ids may
    contain any character, including the separator)."""
    return f"{_STATE_PREFIX}{len(group_id)}.{group_id}."


def describe_entries(explicit: Mapping[str, str]) -> list[DescribeConfigsResourceResult]:
    """DescribeConfigs entries of a group: every key, explicit ones as GROUP_CONFIG."""
    return [
        {
            "name": key.name,
            "value": explicit.get(key.name, key.default),
            "config_source": SOURCE_GROUP_CONFIG if key.name in explicit else 5,
            "config_type": key.config_type,
            "documentation": key.documentation,
        }
        for key in _KEYS
    ]
