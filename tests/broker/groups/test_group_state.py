"""The sans-IO group state machine: join/sync/heartbeat/leave, timeouts, static members and the
two-round cooperative rebalance, driven without sockets or an event loop."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.groups.group import Group
from tabletopic.broker.groups.model import (
    GroupConfig,
    GroupState,
    MemberIdentity,
    Persist,
    TimerKey,
    TimerKind,
)
from tabletopic.broker.groups.transitions import IllegalTransition, check_transition
from tests.support.group_harness import RANGE, Driver


def test_first_join_without_member_id_is_told_member_id_required() -> None:
    d = Driver()
    result = d.joined(d.join(client_id="rdkafka"))
    assert result.error is ErrorCode.member_id_required
    assert result.member_id.startswith("rdkafka-")
    assert d.group.state is GroupState.EMPTY
    assert result.member_id in d.group.pending_members


def test_single_member_joins_as_leader_and_gets_its_own_assignment_after_sync() -> None:
    d = Driver()
    member_id, ticket = d.join_new()
    joined = d.joined(ticket)
    assert joined.error is ErrorCode.none
    assert joined.generation_id == 1
    assert joined.leader_id == member_id
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [member_id]
    assert joined.members[0].metadata == b"range-meta"
    assert d.group.state is GroupState.COMPLETING_REBALANCE

    synced = d.synced(d.sync(member_id, 1, {member_id: b"mine"}))
    assert synced.error is ErrorCode.none and synced.assignment == b"mine"
    assert d.group.state is GroupState.STABLE
    snapshot = d.persisted[-1]
    assert snapshot is not None and snapshot.members[0].assignment == b"mine"


def test_join_before_v4_is_admitted_without_member_id_round_trip() -> None:
    d = Driver()
    result = d.joined(d.join(v4=False))
    assert result.error is ErrorCode.none and result.generation_id == 1


def test_new_member_triggers_rebalance_seen_by_heartbeats_and_leader_gets_all_metadata() -> None:
    d = Driver()
    (a,), generation = d.stable_group("a")
    b, b_join = d.join_new("b")
    assert d.group.state is GroupState.PREPARING_REBALANCE
    assert d.pending(b_join)
    assert d.heartbeat(a, generation) is ErrorCode.rebalance_in_progress

    a_join = d.join(a, client_id="a")
    a_result, b_result = d.joined(a_join), d.joined(b_join)
    assert a_result.generation_id == b_result.generation_id == generation + 1
    assert a_result.leader_id == b_result.leader_id == a
    assert {m.member_id for m in a_result.members} == {a, b}
    assert b_result.members == ()

    # The follower waits for the leader's assignment.
    b_sync = d.sync(b, generation + 1)
    assert d.pending(b_sync)
    assert d.heartbeat(b, generation + 1) is ErrorCode.none  # CompletingRebalance: plain heartbeat
    a_sync = d.sync(a, generation + 1, {a: b"A", b: b"B"})
    assert d.synced(a_sync).assignment == b"A"
    assert d.synced(b_sync).assignment == b"B"
    assert d.group.state is GroupState.STABLE


def test_protocol_is_one_every_member_supports_by_vote_with_ties_to_the_leader() -> None:
    d = Driver()
    both = (("roundrobin", b"r"), ("range", b"g"))
    (a,), _ = d.stable_group("a", protocols=both)
    assert d.group.protocol_name == "roundrobin"
    b, b_join = d.join_new("b", protocols=(("range", b"g2"), ("roundrobin", b"r2")))
    a_join = d.join(a, client_id="a", protocols=both)
    result = d.joined(a_join)
    d.joined(b_join)
    # One vote each: the leader's preference wins the tie.
    assert result.protocol_name == "roundrobin"
    assert {m.member_id: m.metadata for m in result.members} == {a: b"r", b: b"r2"}

    _c, c_join = d.join_new("c", protocols=(("range", b"g3"),))
    a_join = d.join(a, client_id="a", protocols=both)
    b_join = d.join(b, client_id="b", protocols=(("range", b"g2"), ("roundrobin", b"r2")))
    assert d.joined(a_join).protocol_name == "range"  # the only common one
    d.joined(b_join), d.joined(c_join)


def test_member_with_no_common_protocol_or_other_protocol_type_is_rejected() -> None:
    d = Driver()
    d.stable_group("a")
    result = d.joined(d.join(client_id="b", protocols=(("sticky", b""),)))
    assert result.error is ErrorCode.inconsistent_group_protocol
    result = d.joined(d.join(client_id="b", protocol_type="connect"))
    assert result.error is ErrorCode.inconsistent_group_protocol
    assert d.joined(d.join(protocols=())).error is ErrorCode.inconsistent_group_protocol


def test_heartbeat_from_unknown_member_or_old_generation_is_refused() -> None:
    d = Driver()
    (a,), generation = d.stable_group("a")
    assert d.heartbeat("nobody", generation) is ErrorCode.unknown_member_id
    assert d.heartbeat(a, generation - 1) is ErrorCode.illegal_generation
    assert d.heartbeat(a, generation) is ErrorCode.none


def test_sync_with_wrong_generation_or_during_rebalance_is_refused() -> None:
    d = Driver()
    (a,), generation = d.stable_group("a")
    assert d.synced(d.sync(a, generation + 5)).error is ErrorCode.illegal_generation
    assert d.synced(d.sync("nobody", generation)).error is ErrorCode.unknown_member_id
    d.join_new("b")
    assert d.synced(d.sync(a, generation)).error is ErrorCode.rebalance_in_progress


def test_stable_follower_rejoining_unchanged_gets_current_generation_without_rebalance() -> None:
    d = Driver()
    (a, b), generation = d.stable_group("a", "b")
    result = d.joined(d.join(b, client_id="b"))
    assert result.error is ErrorCode.none and result.generation_id == generation
    assert result.leader_id == a and result.members == ()
    assert d.group.state is GroupState.STABLE


def test_session_timeout_expires_silent_member_and_survivor_rebalances_alone() -> None:
    d = Driver()
    (a, b), generation = d.stable_group("a", "b")
    for _ in range(4):
        d.advance(4_000)
        assert d.heartbeat(a, generation) in (ErrorCode.none, ErrorCode.rebalance_in_progress)
    assert b not in d.group.members
    assert d.group.state is GroupState.PREPARING_REBALANCE
    result = d.joined(d.join(a, client_id="a"))
    assert result.generation_id == generation + 1 and [m.member_id for m in result.members] == [a]
    assert d.heartbeat(b, generation) is ErrorCode.unknown_member_id


def test_rebalance_timeout_completes_join_without_members_that_did_not_rejoin() -> None:
    d = Driver()
    (a, b), generation = d.stable_group("a", "b")
    c, c_join = d.join_new("c", rebalance_ms=5_000)
    a_join = d.join(a, client_id="a")
    d.advance(4_000)
    assert d.heartbeat(b, generation) is ErrorCode.rebalance_in_progress  # b ignores the hint
    assert d.pending(a_join) and d.pending(c_join)
    d.advance(30_000)  # the largest rebalance timeout among members
    result = d.joined(a_join)
    assert {m.member_id for m in result.members} == {a, c}
    assert d.joined(c_join).generation_id == generation + 1
    assert d.heartbeat(b, generation) is ErrorCode.unknown_member_id


def test_leave_of_last_member_empties_group_and_bumps_generation() -> None:
    d = Driver()
    (a,), generation = d.stable_group("a")
    assert d.leave(MemberIdentity(a)) == [ErrorCode.none]
    assert d.group.state is GroupState.EMPTY
    assert d.group.generation_id == generation + 1
    assert d.group.members == {}
    assert d.persisted[-1] is not None and d.persisted[-1].members == ()
    assert d.leave(MemberIdentity(a)) == [ErrorCode.unknown_member_id]
    assert not [k for k in d.timers if k.kind is TimerKind.SESSION]


def test_leave_while_followers_wait_for_sync_tells_them_to_rejoin() -> None:
    d = Driver()
    (a,), _ = d.stable_group("a")
    b, b_join = d.join_new("b")
    d.joined(d.join(a, client_id="a"))
    generation = d.joined(b_join).generation_id
    b_sync = d.sync(b, generation)
    assert d.leave(MemberIdentity(a)) == [ErrorCode.none]
    assert d.synced(b_sync).error is ErrorCode.rebalance_in_progress
    # b alone rejoins and becomes the leader.
    result = d.joined(d.join(b, client_id="b"))
    assert result.leader_id == b and result.generation_id == generation + 1


def test_batched_leave_reports_each_member() -> None:
    d = Driver()
    (a, b), _ = d.stable_group("a", "b")
    errors = d.leave(MemberIdentity(a), MemberIdentity("ghost"), MemberIdentity(b))
    assert errors == [ErrorCode.none, ErrorCode.unknown_member_id, ErrorCode.none]
    assert d.group.state is GroupState.EMPTY


def test_static_member_restart_with_same_metadata_keeps_assignment_without_rebalance() -> None:
    d = Driver()
    (a,), generation = d.stable_group("a")
    s_join = d.join(client_id="s", instance="i-1")  # static: no MEMBER_ID_REQUIRED round
    d.joined(d.join(a, client_id="a"))
    s = d.joined(s_join).member_id
    generation += 1
    d.sync(s, generation)
    d.synced(d.sync(a, generation, {a: b"A", s: b"S"}))
    assert d.group.state is GroupState.STABLE

    # The static process restarts: new member id, same instance id.
    result = d.joined(d.join(client_id="s", instance="i-1"))
    assert result.error is ErrorCode.none
    assert result.member_id != s and result.generation_id == generation
    assert result.leader_id == a and result.members == ()
    assert d.group.state is GroupState.STABLE
    assert d.heartbeat(s, generation, instance="i-1") is ErrorCode.fenced_instance_id
    assert d.heartbeat(result.member_id, generation, instance="i-1") is ErrorCode.none
    assert d.synced(d.sync(result.member_id, generation, instance="i-1")).assignment == b"S"
    assert d.joined(d.join(s, client_id="s", instance="i-1")).error is ErrorCode.fenced_instance_id
    assert isinstance(d.persisted[-1], type(d.group.snapshot()))


def test_static_leader_restart_pre_v9_is_answered_as_follower_and_v9_skips_assignment() -> None:
    d = Driver()
    s_join = d.join(client_id="s", instance="i-1")
    s = d.joined(s_join).member_id
    d.synced(d.sync(s, 1, {s: b"S"}))

    old = d.joined(d.join(client_id="s", instance="i-1"))
    assert old.leader_id == s != old.member_id  # looks like a follower: just syncs
    assert d.group.leader_id == old.member_id
    assert d.synced(d.sync(old.member_id, 1, instance="i-1")).assignment == b"S"

    new = d.joined(d.join(client_id="s", instance="i-1", v9=True))
    assert new.leader_id == new.member_id and new.skip_assignment
    assert [m.member_id for m in new.members] == [new.member_id]
    assert d.group.state is GroupState.STABLE and d.group.generation_id == 1


def test_static_member_restart_with_changed_subscription_rebalances() -> None:
    d = Driver()
    s = d.joined(d.join(client_id="s", instance="i-1")).member_id
    d.synced(d.sync(s, 1, {s: b"S"}))
    ticket = d.join(client_id="s", instance="i-1", protocols=(("range", b"other-topics"),))
    assert d.group.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
    assert d.joined(ticket).generation_id == 2


def test_static_member_not_rejoining_stays_in_group_after_rebalance_timeout() -> None:
    d = Driver()
    a = d.joined(d.join(client_id="a", instance="i-a")).member_id
    d.synced(d.sync(a, 1, {a: b"A"}))
    b, b_join = d.join_new("b")
    for _ in range(6):  # a heartbeats (told to rejoin) but never rejoins
        d.advance(5_000)
        d.heartbeat(a, 1, instance="i-a")
    result = d.joined(b_join)
    # The leader left the rebalance; the joined member leads, and the static member is kept.
    assert result.leader_id == b and {m.member_id for m in result.members} == {a, b}


def test_cooperative_two_round_rebalance_keeps_members_and_moves_partitions() -> None:
    """Round 1 assigns the new member nothing while the old owner revokes; the owner's rejoin with
    its shrunk ownership triggers round 2 that hands the revoked partition over."""
    d = Driver()
    coop = lambda owned: (("cooperative-sticky", owned),)  # noqa: E731
    (a,), generation = d.stable_group("a", protocols=coop(b"owns:"))
    d.apply(d.group.heartbeat(a, None, generation)[1])

    b, b_join = d.join_new("b", protocols=coop(b"owns:"))
    assert d.heartbeat(a, generation) is ErrorCode.rebalance_in_progress
    a_join = d.join(a, client_id="a", protocols=coop(b"owns:p0,p1"))
    round1 = d.joined(a_join)
    assert round1.protocol_name == "cooperative-sticky"
    assert {m.member_id: m.metadata for m in round1.members} == {a: b"owns:p0,p1", b: b"owns:"}
    d.joined(b_join)
    b_sync = d.sync(b, round1.generation_id)
    d.synced(d.sync(a, round1.generation_id, {a: b"p0", b: b""}))
    assert d.synced(b_sync).assignment == b""
    assert d.group.state is GroupState.STABLE

    # Round 2: a revoked p1 and rejoins; b learns through its heartbeat.
    a_join = d.join(a, client_id="a", protocols=coop(b"owns:p0"))
    assert d.heartbeat(b, round1.generation_id) is ErrorCode.rebalance_in_progress
    b_join = d.join(b, client_id="b", protocols=coop(b"owns:"))
    round2 = d.joined(a_join)
    assert round2.generation_id == round1.generation_id + 1 == d.joined(b_join).generation_id
    b_sync = d.sync(b, round2.generation_id)
    d.synced(d.sync(a, round2.generation_id, {a: b"p0", b: b"p1"}))
    assert d.synced(b_sync).assignment == b"p1"
    assert set(d.group.members) == {a, b}


def test_initial_rebalance_delay_gathers_members_joining_an_empty_group() -> None:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=3_000, min_session_timeout_ms=1))
    a, a_join = d.join_new("a")
    d.advance(1_000)
    b, b_join = d.join_new("b")
    d.advance(1_999)
    assert d.pending(a_join) and d.pending(b_join)
    d.advance(1)  # first delay over, but b arrived during it: wait one more delay
    assert d.pending(a_join)
    d.advance(3_000)
    result = d.joined(a_join)
    assert result.generation_id == 1 and {m.member_id for m in result.members} == {a, b}
    assert d.joined(b_join).generation_id == 1


def test_group_max_size_refuses_new_members_but_not_existing_ones() -> None:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1, max_size=1))
    (a,), _ = d.stable_group("a")
    assert d.joined(d.join(client_id="b")).error is ErrorCode.group_max_size_reached
    assert d.joined(d.join(a, client_id="a")).error is ErrorCode.none


def test_members_that_never_sync_are_removed_after_rebalance_timeout() -> None:
    d = Driver()
    (a,), _ = d.stable_group("a")
    b, b_join = d.join_new("b", rebalance_ms=5_000)
    a_join = d.join(a, client_id="a", rebalance_ms=5_000)
    generation = d.joined(a_join).generation_id
    d.joined(b_join)
    b_sync = d.sync(b, generation)  # the leader a never syncs
    d.advance(5_000)
    assert a not in d.group.members
    assert d.synced(b_sync).error is ErrorCode.rebalance_in_progress
    assert d.group.state is GroupState.PREPARING_REBALANCE


def test_pending_member_id_expires_after_session_timeout() -> None:
    d = Driver()
    result = d.joined(d.join(client_id="x", session_ms=2_000))
    d.advance(2_000)
    assert result.member_id not in d.group.pending_members
    assert d.joined(d.join(result.member_id, client_id="x")).error is ErrorCode.unknown_member_id


def test_offset_commit_rules_for_members_and_simple_committers() -> None:
    d = Driver()
    group = d.group
    assert group.check_offset_commit("", None, -1) is ErrorCode.none  # simple consumer, Empty group
    (a,), generation = d.stable_group("a")
    assert group.check_offset_commit("", None, -1) is ErrorCode.unknown_member_id
    assert group.check_offset_commit(a, None, generation) is ErrorCode.none
    assert group.check_offset_commit(a, None, generation - 1) is ErrorCode.illegal_generation
    _b, _b_join = d.join_new("b")
    # Preparing: members of the current generation still commit (eager revocation commits).
    assert group.check_offset_commit(a, None, generation) is ErrorCode.none
    d.join(a, client_id="a")
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.check_offset_commit(a, None, generation + 1) is ErrorCode.rebalance_in_progress


def test_snapshot_restores_a_stable_group_whose_members_must_heartbeat_again() -> None:
    d = Driver()
    (a, b), generation = d.stable_group("a", "b")
    restored, actions = Group.restore(d.group.snapshot(), d.config)
    assert restored.state is GroupState.STABLE and restored.generation_id == generation
    assert restored.leader_id == a
    assert restored.members[b].assignment == f"assignment-of-{b}".encode()
    armed = {a.key for a in actions if hasattr(a, "key")}
    assert armed == {TimerKey(TimerKind.SESSION, a), TimerKey(TimerKind.SESSION, b)}
    assert not [a for a in actions if isinstance(a, Persist)]


def test_only_empty_groups_can_be_deleted() -> None:
    d = Driver()
    d.stable_group("a")
    assert d.group.check_deletable() is ErrorCode.non_empty_group
    d.leave(MemberIdentity(next(iter(d.group.members))))
    assert d.group.check_deletable() is ErrorCode.none
    d.apply(d.group.mark_dead())
    assert d.group.state is GroupState.DEAD
    assert d.joined(d.join()).error is ErrorCode.coordinator_not_available


def test_transition_table_rejects_skipping_the_rebalance() -> None:
    check_transition(GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
    with pytest.raises(IllegalTransition):
        check_transition(GroupState.EMPTY, GroupState.STABLE)
    with pytest.raises(IllegalTransition):
        check_transition(GroupState.STABLE, GroupState.COMPLETING_REBALANCE)


def test_describe_shows_metadata_and_assignment_only_when_stable() -> None:
    d = Driver()
    (a,), _ = d.stable_group("a", protocols=(("range", b"\x00\x01\xff"),))
    described = d.group.describe()
    assert described.protocol_name == "range" and described.state is GroupState.STABLE
    assert described.members[0].metadata == b"\x00\x01\xff"
    assert described.members[0].assignment == f"assignment-of-{a}".encode()
    d.join_new("b", protocols=RANGE)
    preparing = d.group.describe()
    assert preparing.protocol_name == "" and preparing.members[0].metadata == b""
