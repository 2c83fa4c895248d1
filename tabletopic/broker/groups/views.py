"""Read-only projections of a group (:class:`~tabletopic.broker.groups.group.Group`): what
DescribeGroups shows, what is persisted, and which topics its members consume (for OffsetDelete).

The group calls these on itself, so they read it through :class:`Group`, the Protocol of what they
read, rather than importing its class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from tabletopic.broker.groups.model import (
    CONSUMER_PROTOCOL_TYPE,
    GroupDescription,
    GroupSnapshot,
    GroupState,
    Member,
    MemberDescription,
)
from tabletopic.broker.groups.subscription import topics as subscribed_topics


class Group(Protocol):
    """What the projections read of a group."""

    @property
    def group_id(self) -> str: ...

    @property
    def state(self) -> GroupState: ...

    @property
    def generation_id(self) -> int: ...

    @property
    def protocol_type(self) -> str | None: ...

    @property
    def protocol_name(self) -> str | None: ...

    @property
    def leader_id(self) -> str | None: ...

    @property
    def members(self) -> Mapping[str, Member]: ...


def describe(group: Group) -> GroupDescription:
    """Members with metadata and assignment only once Stable, as Kafka reports them (mid-rebalance
    metadata would belong to a generation that may never start)."""
    stable = group.state is GroupState.STABLE
    members = tuple(
        MemberDescription(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            metadata=m.metadata_for(group.protocol_name) if stable else b"",
            assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return GroupDescription(
        group_id=group.group_id,
        state=group.state,
        protocol_type=group.protocol_type or "",
        protocol_name=(group.protocol_name or "") if stable else "",
        members=members,
    )


def snapshot(group: Group) -> GroupSnapshot:
    return GroupSnapshot(
        group_id=group.group_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id,
        members=tuple(m.snapshot() for m in group.members.values()),
    )


def is_subscribed_to(group: Group, topic: str) -> bool:
    """Does an active member consume ``topic``? Unknown (non-consumer protocol, unreadable
    metadata) counts as yes: refusing an OffsetDelete is safer than losing live progress."""
    if group.state in (GroupState.EMPTY, GroupState.DEAD):
        return False
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return True
    for member in group.members.values():
        protocol = group.protocol_name or (member.protocols[0][0] if member.protocols else None)
        topics = subscribed_topics(member.metadata_for(protocol))
        if topics is None or topic in topics:
            return True
    return False
