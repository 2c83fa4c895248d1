"""A KIP-848 group's stored record (``consumer_records.py``): what a new coordinator reads back is
the group it was written from, field for field, through JSON, with a timer for every member."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tabletopic.broker.groups.consumer_group import (
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    HeartbeatRequest,
    MemberState,
    SetTimer,
    TimerKind,
)
from tabletopic.broker.groups.consumer_records import group_record, restored_group
from tabletopic.broker.groups.settings import GroupSettings

TOPICS = {"t": 4, "u": 1}


def _join(group: ConsumerGroup, member: str, instance_id: str | None = None) -> int:
    request = HeartbeatRequest(
        member,
        0,
        instance_id=instance_id,
        rack_id="rack-a",
        rebalance_timeout_ms=7_000,
        subscribed_topic_names=("t",),
        subscribed_topic_regex="u.*",
        client_id=f"client-{member}",
        client_host="/127.0.0.1",
    )
    result, _ = group.heartbeat(request, TOPICS)
    return result.member_epoch


def _mid_rebalance() -> ConsumerGroup:
    """Three members: ``a`` asked to revoke, ``b`` waiting for them, static ``s`` left for now."""
    group = ConsumerGroup("g")
    a_epoch = _join(group, "a")
    _join(group, "s", instance_id="instance-s")
    group.heartbeat(HeartbeatRequest("s", group.members["s"].member_epoch, owned=frozenset()), TOPICS)
    group.heartbeat(HeartbeatRequest("s", STATIC_LEAVE_EPOCH), TOPICS)
    _join(group, "b")
    group.heartbeat(HeartbeatRequest("a", a_epoch, owned=group.members["a"].assigned), TOPICS)
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert group.members["s"].member_epoch == STATIC_LEAVE_EPOCH
    return group


def _data(group: ConsumerGroup) -> dict[str, object]:
    fields = dataclasses.fields(ConsumerGroup)
    return {f.name: getattr(group, f.name) for f in fields if f.name not in ("settings", "partition_racks")}


def test_a_group_read_back_from_its_json_record_is_the_group_it_was_written_from() -> None:
    group = _mid_rebalance()
    restored, actions = restored_group("g", group_record(group), GroupSettings(), lambda topics: {})
    assert _data(restored) == _data(group)
    sessions = {a.member_id for a in actions if isinstance(a, SetTimer) and a.kind is TimerKind.SESSION}
    rebalances = [a for a in actions if isinstance(a, SetTimer) and a.kind is TimerKind.REBALANCE]
    assert sessions == {"a", "b", "s"}
    assert [(a.member_id, a.delay_ms) for a in rebalances] == [("a", 7_000)]


def test_a_record_of_another_version_is_refused() -> None:
    record = json.loads(group_record(_mid_rebalance())) | {"version": 2}
    with pytest.raises(ValueError, match="version 2"):
        restored_group("g", json.dumps(record), GroupSettings(), lambda topics: {})


GARBLED = ["", "not json", "[1, 2]", "null", '{"version": 1}', '{"version": 1, "members": [7]}']


@pytest.mark.parametrize("text", GARBLED)
def test_a_garbled_record_is_refused_with_an_error_the_coordinator_catches(text: str) -> None:
    with pytest.raises((KeyError, TypeError, ValueError, AttributeError)):
        restored_group("g", text, GroupSettings(), lambda topics: {})
