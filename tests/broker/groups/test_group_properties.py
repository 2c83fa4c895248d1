"""Property test of the state machine: any interleaving of joins, syncs, heartbeats, leaves, static
restarts and time keeps the group consistent, answers every held request at most once, and once the
clients go quiet every held request is answered and the group drains to Empty."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tabletopic.broker.groups.model import GroupState, JoinResult, MemberIdentity, SyncResult
from tests.support.group_harness import Driver

CLIENTS = ["a", "b", "c"]

operation = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(CLIENTS), st.booleans()),
    st.tuples(st.just("static"), st.sampled_from(CLIENTS), st.booleans()),
    st.tuples(st.just("sync"), st.sampled_from(CLIENTS), st.booleans()),
    st.tuples(st.just("heartbeat"), st.sampled_from(CLIENTS), st.booleans()),
    st.tuples(st.just("leave"), st.sampled_from(CLIENTS), st.booleans()),
    st.tuples(st.just("advance"), st.integers(0, 12_000), st.booleans()),
)


def check_invariants(d: Driver) -> None:
    g = d.group
    members = g.members
    if g.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
        assert g.leader_id in members and g.protocol_name is not None
    if g.state is GroupState.EMPTY:
        assert not members
    if g.state is GroupState.STABLE:
        assert all(m.join_ticket is None and m.sync_ticket is None for m in members.values())
    if g.state is not GroupState.PREPARING_REBALANCE:
        assert all(m.join_ticket is None for m in members.values())
    for instance, member_id in g.static_members.items():
        assert members[member_id].group_instance_id == instance
    for m in members.values():
        for ticket in (m.join_ticket, m.sync_ticket):
            assert ticket is None or ticket not in d.results


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, max_size=40))
def test_any_interleaving_keeps_the_group_consistent_and_drains(ops: list[tuple[str, Any, bool]]) -> None:
    d = Driver()
    known: dict[str, tuple[str, int]] = {}  # client -> (member id, generation)
    issued: list[int] = []

    def learn(client: str, ticket: int) -> None:
        result = d.results.get(ticket)
        if isinstance(result, JoinResult) and result.member_id:
            known[client] = (result.member_id, result.generation_id)

    for kind, arg, flag in ops:
        if kind == "advance":
            d.advance(arg)
        elif kind in ("join", "static"):
            member_id = known.get(arg, ("", -1))[0] if flag else ""
            instance = f"i-{arg}" if kind == "static" else None
            ticket = d.join(member_id, client_id=arg, instance=instance, session_ms=5_000, rebalance_ms=8_000)
            issued.append(ticket)
            learn(arg, ticket)
        elif arg in known:
            member_id, generation = known[arg]
            if kind == "sync":
                assignments = {m: b"x" for m in d.group.members} if flag else {}
                issued.append(d.sync(member_id, generation, assignments))
            elif kind == "heartbeat":
                d.heartbeat(member_id, generation)
            else:
                d.leave(MemberIdentity(member_id))
        # Held joins answered meanwhile teach the clients their ids and generations.
        for ticket in issued:
            result = d.results.get(ticket)
            if isinstance(result, JoinResult) and result.member_id in d.group.members:
                for client in CLIENTS:
                    if known.get(client, ("",))[0] == result.member_id:
                        known[client] = (result.member_id, result.generation_id)
        check_invariants(d)
        event(d.group.state.value)

    d.advance(10 * 60_000)  # everyone goes quiet
    check_invariants(d)
    assert d.group.state is GroupState.EMPTY
    assert not d.timers
    for ticket in issued:
        assert isinstance(d.results.get(ticket), JoinResult | SyncResult), f"ticket {ticket} never answered"
