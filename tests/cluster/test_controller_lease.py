"""The controller lease against a real PostgreSQL: a broker stalled inside a database transaction
(SIGSTOP, a frozen VM, a cut network) must not keep the controller row locked, or no other broker
could take the controller over and no partition of a dead broker would move."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from tabletopic import database
from tabletopic.cluster.db import (
    RETIRED,
    ClusterMetadata,
    NodeFenced,
    broker_state,
    controller_table,
    nodes_table,
)

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

ENDPOINTS = {"PLAINTEXT": ("127.0.0.1", 9092)}


def test_a_controller_stalled_mid_transaction_loses_its_locks_and_the_lease_moves(postgres_url: str) -> None:
    engine = database.create_engine(postgres_url, idle_transaction_timeout_ms=500)
    meta = ClusterMetadata(engine)
    meta.migrate()
    epochs = {node: meta.register(node, None, ENDPOINTS, lease_s=30) for node in (1, 2)}
    assert meta.acquire_controller(1, epochs[1], lease_s=0.2) == 1
    _lapse(engine, 1)  # a stalled broker renews neither of its leases
    stalled = engine.connect()
    stalled.begin()  # the controller's round, frozen after locking its row
    stalled.execute(sa.select(controller_table).with_for_update()).all()
    time.sleep(0.3)  # the subject: its 0.2 s lease runs out while it holds the row

    taken: list[int | None] = []
    contender = threading.Thread(
        target=lambda: taken.append(meta.acquire_controller(2, epochs[2], lease_s=3.0))
    )
    started = time.monotonic()
    contender.start()
    contender.join(timeout=15)
    assert taken == [2], "the stalled transaction still holds the controller row"
    print(f"controller taken over {time.monotonic() - started:.2f} s after the stall")
    with pytest.raises(sa.exc.DBAPIError):  # the server ended the stalled session
        stalled.execute(sa.select(1))
    stalled.close()
    engine.dispose()


def test_only_a_live_incarnation_takes_the_controller_lease(postgres_url: str) -> None:
    """A broker whose shared WAL was taken over (its row says retired) or whose lease lapsed learns
    that its incarnation is over a moment later; taking the free controller lease meanwhile, it
    would hold it from the brokers that are still in the cluster (a fault run saw a broker woken
    from SIGSTOP become controller 40 ms after it was told to leave)."""
    engine, meta = _without_controller(postgres_url)
    taken_over = meta.register(11, None, ENDPOINTS, lease_s=30)
    meta.set_state(11, taken_over, RETIRED, expire=True)  # what a WAL takeover writes
    lapsed = meta.register(12, None, ENDPOINTS, lease_s=-1)
    live = meta.register(13, None, ENDPOINTS, lease_s=30)

    assert meta.acquire_controller(11, taken_over, lease_s=30) is None
    with pytest.raises(NodeFenced):  # woken from a pause, it cannot renew its way back in either
        meta.renew(11, taken_over, 30, {})
    assert 11 not in meta.live_nodes_other_than(13)
    assert broker_state(meta.snapshot().nodes[11]) == "dead"  # not "stopped": it did not leave
    # One that left cleanly has its WAL taken over too, and keeps saying it stopped.
    left = meta.register(14, None, ENDPOINTS, lease_s=30)
    meta.set_state(14, left, "stopped", expire=True)
    meta.set_state(14, left, RETIRED, expire=True)
    assert broker_state(meta.snapshot().nodes[14]) == "stopped"
    assert meta.acquire_controller(12, lapsed, lease_s=30) is None
    assert meta.acquire_controller(13, live - 1, lease_s=30) is None  # an older incarnation
    assert meta.acquire_controller(13, live, lease_s=30) is not None
    engine.dispose()


def test_a_controller_round_holds_off_contenders_but_not_its_own_renewal(postgres_url: str) -> None:
    """A round over thousands of partitions takes seconds under load. A renewal that waited for it
    let the controller's lease lapse in the middle of a failover; a contender must still wait, so
    that no second controller decides while the round writes."""
    engine, meta = _without_controller(postgres_url)
    controller, contender = (meta.register(n, None, ENDPOINTS, lease_s=30) for n in (21, 22))
    # A long lease first, so a slow machine cannot let it lapse before the round and the renewal
    # run; the renewal makes it short, and nothing bounds how long after it the sleep below ends.
    epoch = meta.acquire_controller(21, controller, lease_s=30)
    assert epoch is not None
    with engine.connect() as round_conn, round_conn.begin():
        meta._check_controller(round_conn, 21, epoch)  # the round's lock, held until it commits
        renewed: list[bool] = []
        renewal = threading.Thread(target=lambda: renewed.append(meta.renew_controller(21, epoch, 0.5)))
        renewal.start()
        renewal.join(timeout=5)
        assert renewed == [True], "the controller's renewal waited for its own round to end"
        taken: list[int | None] = []
        waiting = threading.Thread(target=lambda: taken.append(meta.acquire_controller(22, contender, 30)))
        waiting.start()
        time.sleep(1.0)  # the subject: the lease (0.5 s) ran out while the round still runs
        assert waiting.is_alive() and not taken, "a contender took the lease in the middle of a round"
    waiting.join(timeout=15)
    assert taken, "the contender still waits after the round ended"
    _lapse(engine, 21)  # the controller's broker is gone too: only then may another take over
    # Its answer is the database's as of when it began to wait (now() is a transaction's start);
    # the next try, as a broker's next round makes, finds the lapsed lease.
    assert meta.acquire_controller(22, contender, lease_s=30) is not None
    engine.dispose()


def test_a_lapsed_controller_lease_waits_for_its_brokers_lease_before_another_takes_it(
    postgres_url: str,
) -> None:
    """The controller lease and its broker's lease are renewed apart: a killed controller's broker
    lease outlives its controller lease by up to a heartbeat. A successor that took over in between
    planned with the dead broker alive, and a topic created then got leaders on it (a clean run)."""
    engine, meta = _without_controller(postgres_url)
    holder, successor = (meta.register(n, None, ENDPOINTS, lease_s=30) for n in (31, 32))
    assert meta.acquire_controller(31, holder, lease_s=-1) is not None  # lapsed at once

    assert meta.acquire_controller(32, successor, lease_s=30) is None  # 31's broker lease runs on
    assert meta.acquire_controller(31, holder, lease_s=-1) is not None  # the holder takes it back
    _lapse(engine, 31)
    assert meta.acquire_controller(32, successor, lease_s=30) is not None
    engine.dispose()


def _lapse(engine: sa.Engine, node: int) -> None:
    """End broker ``node``'s lease now, as a broker that stopped renewing it finds it."""
    with engine.begin() as conn:
        conn.execute(
            sa.update(nodes_table)
            .where(nodes_table.c.node_id == node)
            .values(lease_expires=sa.func.now() - sa.text("interval '1 second'"))
        )


def _without_controller(postgres_url: str) -> tuple[sa.Engine, ClusterMetadata]:
    """The cluster tables, with the controller lease free for whoever may take it."""
    engine = database.create_engine(postgres_url)
    meta = ClusterMetadata(engine)
    meta.migrate()
    with engine.begin() as conn:
        conn.execute(sa.update(controller_table).values(node_id=None))
    return engine, meta


def test_brokers_starting_together_on_a_fresh_database_take_the_first_lease_without_an_error(
    postgres_url: str,
) -> None:
    """The controller row is created by the first round that finds none. Three brokers of a new
    cluster start at once (``cluster up``): the ones that lost the race to insert it failed their
    round on the primary key ("cluster round failed: UniqueViolation" in every first start's log)."""
    engine = database.create_engine(postgres_url)
    meta = ClusterMetadata(engine)
    meta.migrate()
    epochs = {node: meta.register(node, None, ENDPOINTS, lease_s=30) for node in (1, 2, 3)}
    start = threading.Barrier(len(epochs))
    results: dict[int, object] = {}

    def first_round(node: int) -> None:
        start.wait()
        try:
            results[node] = meta.acquire_controller(node, epochs[node], lease_s=30)
        except Exception as exc:  # what the round would log
            results[node] = exc

    rounds = [threading.Thread(target=first_round, args=(node,)) for node in epochs]
    for thread in rounds:
        thread.start()
    for thread in rounds:
        thread.join(timeout=15)

    assert not [r for r in results.values() if isinstance(r, Exception)], results
    assert [r for r in results.values() if r is not None] == [1], results  # one controller, epoch 1
    engine.dispose()
