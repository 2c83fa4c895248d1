"""The share-partition state machine (KIP-932) without I/O: acquisition, acknowledgement types,
lock timeouts, the delivery count limit, SPSO movement and snapshots; the share group's membership;
a property over random interleavings (no record held by two members, the SPSO never passes a
record still to deliver); and the share state table round trip."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker.groups.share_group import ShareGroup, ShareHeartbeat
from tabletopic.broker.groups.share_partition import (
    AckType,
    AcquiredRange,
    RecordState,
    SharePartition,
    Snapshot,
)
from tabletopic.broker.groups.share_store import ShareStateStore

LOCK_MS = 1000


def _partition(start: int = 0, limit: int = 5, max_locks: int = 2000) -> SharePartition:
    return SharePartition(start, limit, LOCK_MS, max_locks)


def test_acquire_locks_records_to_one_member_until_acknowledged() -> None:
    p = _partition()
    assert p.acquire("a", 0, 10, 4, now_ms=0) == [AcquiredRange(0, 3, 1)]
    assert p.acquire("b", 0, 10, 100, now_ms=0) == [AcquiredRange(4, 9, 1)]
    assert p.acquire("c", 0, 10, 100, now_ms=0) == []  # everything is locked
    assert p.acknowledge("a", 0, 3, (AckType.ACCEPT,)) is ErrorCode.none
    assert p.spso == 4 and p.speo == 10


def test_acknowledging_records_not_held_is_invalid_record_state_and_changes_nothing() -> None:
    p = _partition()
    p.acquire("a", 0, 5, 100, now_ms=0)
    assert p.acknowledge("b", 0, 1, (AckType.ACCEPT,)) is ErrorCode.invalid_record_state
    assert (
        p.acknowledge("a", 3, 7, (AckType.ACCEPT,)) is ErrorCode.invalid_record_state
    )  # 5..7 never acquired
    assert p.acknowledge("a", 0, 1, (9,)) is ErrorCode.invalid_request
    assert p.acknowledge("a", 0, 2, (1, 2)) is ErrorCode.invalid_request  # neither one nor one per offset
    assert all(p.records[o].state is RecordState.ACQUIRED for o in range(5))


def test_release_redelivers_with_a_higher_delivery_count_and_reject_archives() -> None:
    p = _partition()
    p.acquire("a", 0, 3, 100, now_ms=0)
    assert p.acknowledge("a", 0, 2, (AckType.RELEASE, AckType.REJECT, AckType.ACCEPT)) is ErrorCode.none
    assert p.records[1].state is RecordState.ARCHIVED
    assert p.acquire("b", 0, 3, 100, now_ms=0) == [AcquiredRange(0, 0, 2)]
    assert p.acknowledge("b", 0, 0, (AckType.ACCEPT,)) is ErrorCode.none
    assert p.spso == 3 and not p.records


def test_lock_timeout_releases_and_delivery_limit_archives() -> None:
    p = _partition(limit=2)
    p.acquire("a", 0, 1, 100, now_ms=0)
    assert p.next_deadline() == LOCK_MS
    assert not p.expire(LOCK_MS - 1)
    assert p.expire(LOCK_MS)
    assert p.acquire("b", 0, 1, 100, now_ms=LOCK_MS) == [AcquiredRange(0, 0, 2)]
    assert p.acknowledge("b", 0, 0, (AckType.RELEASE,)) is ErrorCode.none  # second delivery: the limit
    assert p.spso == 1 and p.acquire("c", 0, 1, 100, now_ms=LOCK_MS) == []


def test_member_release_and_the_in_flight_limit() -> None:
    p = _partition(max_locks=3)
    assert p.acquire("a", 0, 10, 100, now_ms=0) == [AcquiredRange(0, 2, 1)]
    assert p.release_member("a") and p.acquired_by("a") == []
    assert p.next_fetch_offset() == 0


def test_snapshot_keeps_delivery_counts_and_makes_acquired_records_available() -> None:
    p = _partition(start=5)
    p.acquire("a", 0, 10, 100, now_ms=0)
    p.acknowledge("a", 5, 6, (AckType.ACCEPT,))
    p.acknowledge("a", 8, 8, (AckType.REJECT,))
    snapshot = p.snapshot()
    restored = SharePartition.restore(snapshot, 5, LOCK_MS, 2000)
    assert (restored.spso, restored.speo, restored.state_epoch) == (7, 10, 0)
    assert restored.acquire("b", 0, 10, 100, now_ms=0) == [AcquiredRange(7, 7, 2), AcquiredRange(9, 9, 2)]


def test_skip_to_log_start_drops_records_retention_removed() -> None:
    p = _partition()
    p.acquire("a", 0, 5, 100, now_ms=0)
    p.skip_to(3)
    assert p.spso == 3 and sorted(p.records) == [3, 4]


def test_share_group_assigns_every_member_all_subscribed_partitions() -> None:
    g = ShareGroup("g", 45000, 10)
    first, _ = g.heartbeat(ShareHeartbeat("a", 0, subscribed_topic_names=("t",)), {"t": 2})
    second, _ = g.heartbeat(ShareHeartbeat("b", 0, subscribed_topic_names=("t",)), {"t": 2})
    assert first.assignment == second.assignment == frozenset({("t", 0), ("t", 1)})
    assert g.heartbeat(ShareHeartbeat("a", 99), {"t": 2})[0].error is ErrorCode.fenced_member_epoch
    assert g.heartbeat(ShareHeartbeat("x", 3), {"t": 2})[0].error is ErrorCode.unknown_member_id
    assert g.heartbeat(ShareHeartbeat("c", 0), {"t": 2})[0].error is ErrorCode.invalid_request
    left, _ = g.heartbeat(ShareHeartbeat("a", -1), {"t": 2})
    assert left.member_epoch == -1 and list(g.members) == ["b"]
    again, _ = g.heartbeat(ShareHeartbeat("b", second.member_epoch), {"t": 3})
    assert again.member_epoch == g.group_epoch and ("t", 2) in (again.assignment or ())


operations = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "ack", "expire", "leave"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 12),
        st.integers(0, 4),
        st.sampled_from([AckType.ACCEPT, AckType.RELEASE, AckType.REJECT]),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_no_record_is_held_twice_and_the_spso_never_passes_a_record_to_deliver(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    p = _partition(limit=3)
    now = 0
    holder: dict[int, str] = {}
    for kind, member, offset, length, ack in ops:
        now += 100
        if kind == "acquire":
            for r in p.acquire(member, 0, 12, length + 1, now):
                for o in range(r.first, r.last + 1):
                    assert o not in holder, "acquired while held by another member"
                    holder[o] = member
        elif kind == "ack":
            if p.acknowledge(member, offset, offset + length, (ack,)) is ErrorCode.none:
                for o in range(offset, offset + length + 1):
                    assert holder.pop(o) == member
        elif kind == "expire":
            now += LOCK_MS
            p.expire(now)
            holder = {o: m for o, m in holder.items() if p.records.get(o) and p.records[o].member_id == m}
        else:
            p.release_member(member)
            holder = {o: m for o, m in holder.items() if m != member}
        for o, record in p.records.items():
            assert o >= p.spso
            assert (record.state is RecordState.ACQUIRED) == (o in holder)
        assert all(o >= p.spso for o in holder)
        first = p.records.get(p.spso)
        assert first is None or first.state in (RecordState.AVAILABLE, RecordState.ACQUIRED)


def test_share_state_store_round_trip(engine: Engine) -> None:
    store = ShareStateStore(engine)
    store.migrate()
    p = _partition(start=2)
    p.acquire("a", 0, 6, 100, now_ms=0)
    p.acknowledge("a", 3, 3, (AckType.ACCEPT,))
    store.save(("g", "t", 0), p.snapshot())
    store.save(("g", "t", 0), p.snapshot())  # a rewrite replaces the row
    assert store.load() == {("g", "t", 0): p.snapshot()}
    assert not store.save(("g", "t", 0), p.snapshot(), leader_epoch=-1)  # a newer leader wrote it
    store.replace_by_admin(("g", "t", 0), 1)  # AlterShareGroupOffsets: the leader's copy is superseded
    assert not store.save(("g", "t", 0), p.snapshot())
    assert store.load_one(("g", "t", 0)) == (Snapshot(1, 1, 1, ()), 0)
    store.delete_group("g")
    assert store.load() == {}


async def test_share_sessions_unused_for_a_session_timeout_are_evicted(engine: Engine) -> None:
    """A leader in a cluster never hears that a member left: its idle session goes at the next open."""
    from tabletopic.broker.groups.share_coordinator import ShareGroups
    from tabletopic.broker.groups.share_settings import ShareSettings

    now = [0]
    shares = ShareGroups(
        ShareSettings(session_timeout_ms=1000), ShareStateStore(engine), clock=lambda: now[0]
    )
    shares.members_known_here = False
    assert shares.session("g", "gone", 0, [("t", 0)])[0] is ErrorCode.none
    now[0] = 500
    assert shares.session("g", "alive", 0)[0] is ErrorCode.none
    now[0] = 1200
    assert shares.session("g", "alive", 1)[0] is ErrorCode.none
    assert shares.session("g", "new", 0)[0] is ErrorCode.none  # evicts "gone" (idle since 0)
    assert shares.session("g", "gone", 1)[0] is ErrorCode.share_session_not_found
    assert shares.session("g", "alive", 2)[0] is ErrorCode.none
