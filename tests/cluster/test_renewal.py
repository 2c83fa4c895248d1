"""Lease renewals on their own thread: at a fixed rate, reported to the loop, never while the loop
is stuck (see ``tabletopic/cluster/renewal.py``)."""

from __future__ import annotations

import asyncio
import threading
import time

from tabletopic.cluster.renewal import Renewal
from tests.support.cluster import wait_until


async def test_a_slow_renewal_does_not_push_the_next_one_back() -> None:
    """Renewed from the loop, the next heartbeat began an interval after a slow renewal *ended*:
    two slow ones in a row left a gap of twice their length plus the interval, past the lease."""
    began: list[float] = []
    release = threading.Event()

    def renew() -> int:
        began.append(time.monotonic())
        if len(began) == 1:
            release.wait(10)  # the first renewal is slow: it waits for the database
        return len(began)

    reported: list[int | Exception] = []
    renewal = Renewal("test-lease", 1.0, renew, reported.append, lambda: True, asyncio.get_running_loop())
    renewal.start()
    try:
        await asyncio.to_thread(wait_until, lambda: len(began) == 1, 10)
        await asyncio.sleep(1.5)  # the subject: the first renewal outlasts the interval
        released = time.monotonic()
        release.set()
        await asyncio.to_thread(wait_until, lambda: len(began) >= 2, 10)
        assert began[1] - released < 0.5, "the next renewal waited a whole interval after a slow one"
        await asyncio.to_thread(wait_until, lambda: len(reported) >= 2, 10)
        assert reported[:2] == [1, 2]  # each outcome handed to the loop, in order
    finally:
        release.set()
        await renewal.stop(5)


async def test_failures_are_reported_and_nothing_is_renewed_while_it_may_not() -> None:
    allowed = threading.Event()
    calls: list[float] = []

    def renew() -> None:
        calls.append(time.monotonic())
        raise ConnectionError("the database is away")

    reported: list[object] = []
    renewal = Renewal("test-lease", 0.05, renew, reported.append, allowed.is_set, asyncio.get_running_loop())
    renewal.start()
    try:
        await asyncio.sleep(0.3)  # the subject: six intervals in which it may not renew
        assert not calls
        allowed.set()
        await asyncio.to_thread(wait_until, lambda: len(reported) >= 2, 10)
        assert all(isinstance(outcome, ConnectionError) for outcome in reported)
    finally:
        await renewal.stop(5)
    stopped_at = len(calls)
    await asyncio.sleep(0.2)  # the subject: four intervals after stop() in which nothing may renew
    assert len(calls) == stopped_at  # stopped: no renewal after stop() returned
