"""Which embedded protocol (assignor) a classic group runs: compatibility of a joining member and
the choice among the protocols every member supports. Pure functions over members."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tabletopic.broker.groups.model import Member, Protocols


def _common(members: Sequence[Member]) -> set[str]:
    names = set(members[0].protocol_names())
    for member in members[1:]:
        names &= set(member.protocol_names())
    return names


def compatible(
    others: Sequence[Member], group_protocol_type: str | None, protocol_type: str, protocols: Protocols
) -> bool:
    """May a member with ``protocol_type``/``protocols`` join a group whose other members are
    ``others``? It needs a protocol type, at least one protocol, the group's protocol type, and one
    protocol every other member supports too (INCONSISTENT_GROUP_PROTOCOL otherwise)."""
    if not protocol_type or not protocols:
        return False
    if not others:
        return True
    if protocol_type != group_protocol_type:
        return False
    common = _common(others)
    return any(name in common for name, _ in protocols)


def select(members: Sequence[Member], leader_id: str | None) -> str:
    """Among the protocols every member supports, each member votes for its most preferred one and
    the most votes win, as in Kafka. Kafka breaks a tie arbitrarily; here it goes to the leader's
    preference order, which makes the choice deterministic.

    Raises:
        ValueError: no members, or no protocol common to all (the join checks prevent both).
    """
    if not members:
        raise ValueError("cannot select a protocol for a group without members")
    candidates = _common(members)
    votes: Counter[str] = Counter()
    for member in members:
        for name in member.protocol_names():
            if name in candidates:
                votes[name] += 1
                break
    if not votes:
        raise ValueError("members share no protocol")
    leader = next((m for m in members if m.member_id == leader_id), members[0])
    order = {name: index for index, name in enumerate(leader.protocol_names())}
    return min(votes, key=lambda name: (-votes[name], order.get(name, len(order)), name))
