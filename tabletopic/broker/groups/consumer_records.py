"""What of a KIP-848 group is stored, so that a restarted or new coordinator carries on with the
same members at the same epochs instead of fencing them all.

A Kafka coordinator writes a consumer group's members, subscriptions and target and current
assignments to ``__consumer_offsets`` and replays them when it loads the partition; a member then
heartbeats to the new coordinator with the epoch it had and keeps its partitions. Without that, the
new coordinator answers every member UNKNOWN_MEMBER_ID: each drops its partitions uncommitted and
rejoins at epoch 0, and whatever it had read since its last commit is delivered again.

The record is one JSON document per group (the whole state machine's data but its timers and
its rack lookup), written whenever a heartbeat or a timer changed it. A record that lags the group
(the coordinator died between a change and its write) is safe: a member ahead of its stored epoch is
answered FENCED_MEMBER_EPOCH and rejoins, as all did before.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tabletopic.broker.groups.assignors import TopicPartition
from tabletopic.broker.groups.consumer_group import (
    Action,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    SetTimer,
    TimerKind,
)
from tabletopic.broker.groups.settings import GroupSettings

RECORD_VERSION = 1

# Stored as they are (strings, numbers, None); the partition sets, the state and the subscribed
# names are converted on the way (JSON has no sets, enums or tuples).
_CONVERTED = {"assigned", "pending_revocation", "state", "subscribed_topic_names"}
_PLAIN_FIELDS = tuple(f.name for f in dataclasses.fields(ConsumerMember) if f.name not in _CONVERTED)


def _partitions(tps: Iterable[TopicPartition]) -> list[list[Any]]:
    return [[topic, partition] for topic, partition in sorted(tps)]


def _partition_set(rows: Iterable[list[Any]]) -> frozenset[TopicPartition]:
    return frozenset((str(topic), int(partition)) for topic, partition in rows)


def _member_record(member: ConsumerMember) -> dict[str, Any]:
    record = {name: getattr(member, name) for name in _PLAIN_FIELDS}
    record.update(
        assigned=_partitions(member.assigned),
        pending_revocation=_partitions(member.pending_revocation),
        state=member.state.value,
        subscribed_topic_names=list(member.subscribed_topic_names),
    )
    return record


def _member(record: Mapping[str, Any]) -> ConsumerMember:
    return ConsumerMember(
        **{name: record[name] for name in _PLAIN_FIELDS},
        assigned=_partition_set(record["assigned"]),
        pending_revocation=_partition_set(record["pending_revocation"]),
        state=MemberState(record["state"]),
        subscribed_topic_names=tuple(record["subscribed_topic_names"]),
    )


def group_record(group: ConsumerGroup) -> str:
    """The group's state as a JSON document."""
    record = {
        "version": RECORD_VERSION,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": [_member_record(m) for m in group.members.values()],
        "target": {member_id: _partitions(tps) for member_id, tps in group.target.items()},
        "subscribed_partitions": dict(group.subscribed_partitions),
        "static_members": dict(group.static_members),
    }
    return json.dumps(record)


def restored_group(
    group_id: str,
    text: str,
    settings: GroupSettings,
    partition_racks: Callable[[Mapping[str, int]], Mapping[TopicPartition, str]],
) -> tuple[ConsumerGroup, list[Action]]:
    """The group a record describes, and the timers its members need: each must heartbeat within
    its session timeout (as after any coordinator change), and a member that still holds partitions
    it must revoke keeps its rebalance timeout.

    Raises:
        ValueError: the record is not JSON, or of a version this release does not know.
        KeyError, TypeError: the record lacks a field or holds one of the wrong type.
    """
    record = json.loads(text)
    if not isinstance(record, dict):
        raise TypeError(f"consumer group record is a {type(record).__name__}, not an object")
    if record.get("version") != RECORD_VERSION:
        raise ValueError(f"consumer group record version {record.get('version')!r} is not {RECORD_VERSION}")
    members = [_member(m) for m in record["members"]]
    group = ConsumerGroup(
        group_id,
        settings,
        group_epoch=int(record["group_epoch"]),
        assignment_epoch=int(record["assignment_epoch"]),
        members={m.member_id: m for m in members},
        target={member_id: _partition_set(tps) for member_id, tps in record["target"].items()},
        subscribed_partitions={str(t): int(n) for t, n in record["subscribed_partitions"].items()},
        static_members={str(i): str(m) for i, m in record["static_members"].items()},
        partition_racks=partition_racks,
    )
    actions: list[Action] = []
    for member in members:
        actions.append(group.session_timer(member))
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            actions.append(SetTimer(TimerKind.REBALANCE, member.member_id, member.rebalance_timeout_ms))
    return group, actions
