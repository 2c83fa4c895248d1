"""Which committed offsets have outlived ``offsets.retention.minutes`` (Kafka's rules, KIP-211).

* A group with members keeps its offsets, except (Stable ``consumer`` groups) those of topics no
  member subscribes to any more, once their last commit is older than the retention.
* An Empty group that once had members loses all its offsets once it has been Empty for the
  retention period (consumers that come back within a week resume where they were).
* A "simple" committer (never had members, no protocol type) loses each offset once its last commit
  is older than the retention.

Pure: the caller supplies the clock and when the group entered its current state.
"""

from __future__ import annotations

from tabletopic.broker.groups.group import Group
from tabletopic.broker.groups.model import CONSUMER_PROTOCOL_TYPE, GroupState
from tabletopic.broker.groups.store import CommittedOffset, TopicPartition


def expired_offsets(
    group: Group,
    offsets: dict[TopicPartition, CommittedOffset],
    state_since_ms: int,
    now_ms: int,
    retention_ms: int,
) -> list[TopicPartition]:
    """The partitions of ``group`` whose offsets should be forgotten at ``now_ms``."""
    if group.state is GroupState.EMPTY and group.protocol_type is not None:
        return list(offsets) if state_since_ms + retention_ms <= now_ms else []
    if group.state is GroupState.EMPTY:
        return [key for key, value in offsets.items() if value.commit_ms + retention_ms <= now_ms]
    if group.state is GroupState.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
        return [
            key
            for key, value in offsets.items()
            if value.commit_ms + retention_ms <= now_ms and not group.is_subscribed_to(key[0])
        ]
    return []
