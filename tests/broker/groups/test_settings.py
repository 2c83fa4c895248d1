"""Kafka's ``group.*`` keys configure the coordinator limits."""

from __future__ import annotations

from tabletopic.broker.groups.model import GroupConfig
from tabletopic.broker.groups.settings import group_config
from tabletopic.config import Config


def test_group_keys_from_configuration_reach_the_coordinator_limits() -> None:
    config = Config({"group.initial.rebalance.delay.ms": "0", "group.max.size": "3"})
    limits = group_config(config)
    assert limits.initial_rebalance_delay_ms == 0 and limits.max_size == 3
    assert limits.min_session_timeout_ms == GroupConfig().min_session_timeout_ms


def test_defaults_match_kafka() -> None:
    assert group_config(Config({})) == GroupConfig(6_000, 1_800_000, 3_000, 2**31 - 1, 4096)
