"""Offset retention: Kafka's expiry rules as a pure function, and the coordinator applying them."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker.groups import subscription
from tabletopic.broker.groups.coordinator import OffsetToCommit
from tabletopic.broker.groups.group import Group
from tabletopic.broker.groups.model import MemberIdentity
from tabletopic.broker.groups.retention import expired_offsets
from tabletopic.broker.groups.store import CommittedOffset
from tests.support.group_coordinators import FAST, ManualClock, make_coordinator
from tests.support.group_harness import Driver

DAY = 24 * 3600 * 1000


def test_simple_committer_offsets_expire_one_by_one_by_commit_time() -> None:
    group = Group("simple")
    offsets = {("t", 0): CommittedOffset(1, commit_ms=0), ("t", 1): CommittedOffset(1, commit_ms=5 * DAY)}
    assert expired_offsets(group, offsets, 0, 7 * DAY, 7 * DAY) == [("t", 0)]


def test_empty_consumer_group_keeps_all_offsets_until_empty_for_the_retention() -> None:
    d = Driver()
    (a,), _ = d.stable_group("a")
    d.leave(MemberIdentity(a))
    offsets = {("t", 0): CommittedOffset(1, commit_ms=0)}
    assert expired_offsets(d.group, offsets, 6 * DAY, 8 * DAY, 7 * DAY) == []
    assert expired_offsets(d.group, offsets, 6 * DAY, 13 * DAY, 7 * DAY) == [("t", 0)]


def test_stable_consumer_group_loses_only_old_offsets_of_topics_nobody_subscribes_to() -> None:
    d = Driver()
    d.stable_group("a", protocols=(("range", subscription.encode(["live"])),))
    offsets = {("live", 0): CommittedOffset(1, commit_ms=0), ("gone", 0): CommittedOffset(1, commit_ms=0)}
    assert expired_offsets(d.group, offsets, 0, 8 * DAY, 7 * DAY) == [("gone", 0)]


async def test_coordinator_expires_offsets_and_drops_groups_left_empty(sqlite_engine: Engine) -> None:
    clock = ManualClock()
    config = dataclasses.replace(FAST, offsets_retention_ms=1_000)
    coordinator = make_coordinator(sqlite_engine, config, clock)
    await coordinator.start()
    try:
        results = await coordinator.commit_offsets("tool", "", None, -1, [OffsetToCommit("orders", 0, 3)])
        assert results == {("orders", 0): ErrorCode.none}
        assert await coordinator.expire_offsets() == 0
        clock.advance(1.1)
        assert await coordinator.expire_offsets() == 1
        assert coordinator.group("tool") is None
        assert coordinator.fetch_offsets("tool", None) == (ErrorCode.none, [])
    finally:
        await coordinator.stop()
