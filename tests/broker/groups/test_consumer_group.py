"""The pure KIP-848 group (``consumer_group.py``) and its assignors, driven without an event loop:
epochs, revocation before assignment, leaves, static members, fencing, and a property test that no
partition is ever owned by two members, whatever the interleaving of heartbeats, lost answers,
slow revocations, expiries and new partitions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tabletopic.broker.groups.assignors import Racks, range_, uniform
from tabletopic.broker.groups.consumer_group import (
    ConsumerGroup,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    TimerKind,
)

TP = tuple[str, int]


def join(
    group: ConsumerGroup, member: str, topics: dict[str, int], instance_id: str | None = None
) -> HeartbeatResult:
    request = HeartbeatRequest(
        member,
        0,
        instance_id=instance_id,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=("t",),
        owned=frozenset(),
    )
    return group.heartbeat(request, topics)[0]


def beat(
    group: ConsumerGroup, member: str, epoch: int, owned: frozenset[TP] | None, topics: dict[str, int]
) -> HeartbeatResult:
    return group.heartbeat(HeartbeatRequest(member, epoch, owned=owned), topics)[0]


def test_first_member_gets_every_partition_at_the_group_epoch() -> None:
    group = ConsumerGroup("g")
    result = join(group, "a", {"t": 3})
    assert result.error is ErrorCode.none
    assert result.member_epoch == group.group_epoch == 1
    assert result.assignment == frozenset({("t", 0), ("t", 1), ("t", 2)})


def test_partition_moves_to_a_new_member_only_after_the_old_owner_revoked_it() -> None:
    topics = {"t": 2}
    group = ConsumerGroup("g")
    a = join(group, "a", topics)
    b = join(group, "b", topics)
    assert b.assignment == frozenset()  # b's target partition is still a's
    assert b.member_epoch == 2 and group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a learns its new target: it keeps one partition and must revoke the other, at its old epoch.
    first = a.assignment or frozenset()
    revoking = beat(group, "a", a.member_epoch, first, topics)
    kept = revoking.assignment or frozenset()
    assert revoking.member_epoch == 1 and len(kept) == 1
    given_up = first - kept
    assert beat(group, "b", 2, frozenset(), topics).assignment is None  # still not released
    # a reports it no longer owns the revoked partition: it moves to epoch 2, b gets the partition.
    assert beat(group, "a", 1, kept, topics).member_epoch == 2
    assert beat(group, "b", 2, frozenset(), topics).assignment == given_up
    assert group.state == "Stable"


def test_leaving_member_gives_its_partitions_to_the_others() -> None:
    topics = {"t": 2}
    group = ConsumerGroup("g")
    join(group, "a", topics)
    join(group, "b", topics)
    assert beat(group, "b", -1, None, topics).member_epoch == -1
    result = beat(group, "a", 1, frozenset({("t", 0), ("t", 1)}), topics)
    assert result.member_epoch == group.group_epoch
    assert result.assignment == frozenset({("t", 0), ("t", 1)})


def test_stale_or_future_epochs_are_fenced_and_unknown_members_told_so() -> None:
    topics = {"t": 1}
    group = ConsumerGroup("g")
    join(group, "a", topics)
    assert beat(group, "a", 7, None, topics).error is ErrorCode.fenced_member_epoch
    assert beat(group, "zz", 3, None, topics).error is ErrorCode.unknown_member_id


def test_static_member_returning_under_a_new_id_keeps_its_partitions() -> None:
    topics = {"t": 2}
    group = ConsumerGroup("g")
    a = join(group, "a", topics, instance_id="i-a")
    assert beat(group, "a", -2, None, topics).member_epoch == -2
    epoch = group.group_epoch
    back = join(group, "a2", topics, instance_id="i-a")
    assert back.assignment == a.assignment and group.group_epoch == epoch  # no rebalance
    assert join(group, "a3", topics, instance_id="i-a").error is ErrorCode.unreleased_instance_id


def test_session_expiry_fences_the_member() -> None:
    topics = {"t": 2}
    group = ConsumerGroup("g")
    join(group, "a", topics)
    group.on_timer(TimerKind.SESSION, "a", topics)
    assert not group.members and group.state == "Empty"


def test_offset_commit_checks_the_member_epoch() -> None:
    group = ConsumerGroup("g")
    join(group, "a", {"t": 1})
    assert group.check_offset_commit("a", 1) is ErrorCode.none
    assert group.check_offset_commit("a", 0) is ErrorCode.stale_member_epoch
    assert group.check_offset_commit("b", 1) is ErrorCode.unknown_member_id


def test_regex_subscription_follows_new_topics() -> None:
    group = ConsumerGroup("g")
    request = HeartbeatRequest(
        "a", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="rx-.*", owned=frozenset()
    )
    first = group.heartbeat(request, {"rx-a": 1, "other": 1})[0]
    assert first.assignment == frozenset({("rx-a", 0)})
    later = beat(group, "a", first.member_epoch, first.assignment, {"rx-a": 1, "rx-b": 1, "other": 1})
    assert later.assignment == frozenset({("rx-a", 0), ("rx-b", 0)})


def test_range_assigns_contiguous_ranges_and_uniform_balances() -> None:
    subs = {"a": frozenset({"t"}), "b": frozenset({"t"})}
    assert range_(subs, {"t": 5}, {}) == {
        "a": frozenset({("t", 0), ("t", 1), ("t", 2)}),
        "b": frozenset({("t", 3), ("t", 4)}),
    }
    current = {"a": frozenset({("t", p) for p in range(6)})}
    spread = uniform({**subs, "c": frozenset({"t"})}, {"t": 6}, current)
    assert sorted(len(v) for v in spread.values()) == [2, 2, 2]
    assert spread["a"] <= current["a"]  # sticky: a keeps two of its own


# Six partitions led in racks a, b, c, a, b, c; members x (rack a), y (rack b), z (no rack).
RACKED = Racks({"x": "a", "y": "b"}, {("t", p): "abc"[p % 3] for p in range(6)})


@pytest.mark.parametrize("assignor", [uniform, range_])
def test_assignors_give_members_their_racks_partitions_while_the_shares_stay_even(assignor: Any) -> None:
    subs = {m: frozenset({"t"}) for m in ("x", "y", "z")}
    result = assignor(subs, {"t": 6}, {}, RACKED)
    assert sorted(len(v) for v in result.values()) == [2, 2, 2]
    assert result["x"] == {("t", 0), ("t", 3)}
    assert result["y"] == {("t", 1), ("t", 4)}
    assert result["z"] == {("t", 2), ("t", 5)}


@pytest.mark.parametrize("assignor", [uniform, range_])
def test_racks_never_unbalance_an_assignment(assignor: Any) -> None:
    """Every partition in rack a and two members there: the third member still gets its share."""
    racks = Racks({"x": "a", "y": "a", "z": "b"}, {("t", p): "a" for p in range(6)})
    result = assignor({m: frozenset({"t"}) for m in ("x", "y", "z")}, {"t": 6}, {}, racks)
    assert sorted(len(v) for v in result.values()) == [2, 2, 2]


@pytest.mark.parametrize("assignor", [uniform, range_])
def test_a_full_racks_partition_does_not_take_the_place_of_another_racks_own(assignor: Any) -> None:
    """Rack c leads three partitions (0, 1, 4), rack b two (3, 5), rack a one (2); a member in each
    and a share of two. Partition 4 cannot go to rack c's full member and must go to rack a's, whose
    second place it fills, not to rack b's, whose second place is partition 5's. Taken in partition
    order, the rack b member (first by id) took 4, and partition 5 went across racks."""
    racks = Racks({"m1-b": "b", "m2-a": "a", "m3-c": "c"}, {("t", p): "ccabcb"[p] for p in range(6)})
    result = assignor({m: frozenset({"t"}) for m in racks.members}, {"t": 6}, {}, racks)
    assert sorted(len(v) for v in result.values()) == [2, 2, 2]
    same_rack = sum(racks.same(m, tp) for m, tps in result.items() for tp in tps)
    assert same_rack == 5, result


def test_uniform_moves_a_partition_to_its_rack_only_where_a_member_is_there() -> None:
    subs = {"x": frozenset({"t"}), "y": frozenset({"t"})}
    current = {"x": frozenset({("t", 1), ("t", 4)}), "y": frozenset({("t", 0), ("t", 3)})}
    swapped = uniform(subs, {"t": 6}, current, RACKED)
    assert {("t", 0), ("t", 3)} <= swapped["x"] and {("t", 1), ("t", 4)} <= swapped["y"]
    unracked = uniform(subs, {"t": 6}, current, Racks({}, RACKED.partitions))
    assert unracked["x"] >= current["x"] and unracked["y"] >= current["y"]  # sticky as before


# ---------------------------------------------------------------------------------------------------
# Property: never two owners


@dataclass
class Client:
    """A consumer as the protocol expects it to behave: it applies an assignment it received
    (revoking what is gone) only when the test says so, and reports what it owns."""

    epoch: int = -1  # -1: not in the group
    owned: frozenset[TP] = frozenset()
    received: frozenset[TP] | None = None
    history: list[int] = field(default_factory=list)


MEMBERS = ["a", "b", "c"]

steps = st.lists(
    st.tuples(
        st.sampled_from(["heartbeat", "heartbeat-null", "apply", "leave", "expire", "lose-answer", "grow"]),
        st.sampled_from(MEMBERS),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.sampled_from(["uniform", "range"]))
def test_no_partition_is_owned_by_two_members_in_any_epoch(ops: list[tuple[str, str]], assignor: str) -> None:
    topics = {"t": 4, "u": 2}
    group = ConsumerGroup("g")
    clients = {m: Client() for m in MEMBERS}

    def heartbeat(name: str, report: bool, keep_answer: bool = True) -> None:
        client = clients[name]
        if client.epoch < 0:
            request = HeartbeatRequest(
                name,
                0,
                rebalance_timeout_ms=1000,
                subscribed_topic_names=("t", "u") if name != "c" else ("t",),
                server_assignor=assignor,
                owned=frozenset(),
            )
        else:
            # A client reports what it owns or is about to take (an assignment received but
            # not applied yet): the coordinator may only count on partitions it let go of.
            may_own = client.owned | (client.received or frozenset())
            request = HeartbeatRequest(name, client.epoch, owned=may_own if report else None)
        result, _ = group.heartbeat(request, topics)
        if not keep_answer:
            return
        if result.error is not ErrorCode.none:
            client.epoch, client.owned, client.received = -1, frozenset(), None  # fenced: drops all
            return
        client.epoch = result.member_epoch
        if result.assignment is not None:
            client.received = result.assignment

    def check() -> None:
        owners: dict[TP, str] = {}
        for name, client in clients.items():
            for tp in client.owned:
                assert tp not in owners, f"{tp} owned by {owners[tp]} and {name}"
                owners[tp] = name
            if client.epoch >= 0:
                server = group.members[name]
                assert client.owned <= server.assigned | server.pending_revocation
        group.owners()  # asserts the server side never records two owners

    for op, name in ops:
        client = clients[name]
        if op == "heartbeat":
            heartbeat(name, True)
        elif op == "heartbeat-null":
            heartbeat(name, False)
        elif op == "lose-answer":
            heartbeat(name, True, keep_answer=False)
        elif op == "apply" and client.received is not None:
            client.owned, client.received = client.received, None
        elif op == "leave" and client.epoch >= 0:
            group.heartbeat(HeartbeatRequest(name, -1), topics)
            clients[name] = Client()
        elif op == "expire" and name in group.members:
            group.on_timer(TimerKind.SESSION, name, topics)
            clients[name] = Client()  # the consumer died with its session
        elif op == "grow":
            topics = {**topics, "t": topics["t"] + 1}
        check()

    # Once every live member heartbeats and applies what it gets (and the sessions of members
    # whose join answer was lost ran out), the group settles: every partition of a subscribed
    # topic has exactly one owner.
    live = [n for n, c in clients.items() if c.epoch >= 0]
    for name in [n for n in group.members if n not in live]:
        group.on_timer(TimerKind.SESSION, name, topics)
    for _ in range(6):
        for name in live:
            heartbeat(name, True)
            received = clients[name].received
            if received is not None:
                clients[name].owned, clients[name].received = received, None
            check()
    if live:
        wanted = {("t", p) for p in range(topics["t"])}
        if any(n != "c" for n in live):
            wanted |= {("u", p) for p in range(topics["u"])}
        owned = set().union(*(clients[n].owned for n in live))
        assert owned == wanted
        assert group.state == "Stable"


@pytest.mark.parametrize("epoch", [-1, -2])
def test_leaving_unknown_member_is_unknown_member_id(epoch: int) -> None:
    result, _ = ConsumerGroup("g").heartbeat(HeartbeatRequest("x", epoch), {})
    assert result.error is ErrorCode.unknown_member_id


def test_classic_member_metadata_owned_partitions_and_assignment_bytes() -> None:
    import struct

    from tabletopic.broker.groups import subscription

    v0 = subscription.encode(["t"])
    assert subscription.owned_partitions(v0) == frozenset()
    # v1: topics, null user data, then owned partitions (what cooperative assignors send).
    owned = struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 0, 3)
    v1 = struct.pack(">hi", 1, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1) + owned
    assert subscription.owned_partitions(v1) == {("t", 0), ("t", 3)}
    assert subscription.owned_partitions(b"\x00\x01garbage") == frozenset()
    encoded = subscription.encode_assignment(frozenset({("t", 3), ("t", 0)}))
    assert encoded == struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(
        ">iiii", 2, 0, 3, -1
    )
