"""``tabletopic.tasks``: a shutdown that hangs says what it waits on (every pending task with the
line it waits at, and every thread's stack, once, after the report's delay; a shutdown that ends in
time says nothing); the waits every loop shares lose no cancellation and leave no waiter behind."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading

import pytest

from tabletopic.tasks import StallReport, first_of, gather_at_most, to_the_end, woken
from tests.support.waiting import wait_until


async def _waits_forever(event: asyncio.Event) -> None:
    await event.wait()


async def test_a_stalled_stop_names_the_task_it_waits_on_and_dumps_every_thread(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    never = asyncio.Event()
    stuck = asyncio.create_task(_waits_forever(never), name="upload-loop")
    blocked = threading.Event()
    worker = threading.Thread(target=blocked.wait, name="commit-worker", daemon=True)
    worker.start()
    try:
        with caplog.at_level(logging.WARNING), StallReport("shutdown", 0.2, logging.getLogger("t")):
            await asyncio.sleep(0.6)  # the subject: a stop outlasting the report's 0.2 s
    finally:
        blocked.set()
        stuck.cancel()
    [record] = [r for r in caplog.records if "still running" in r.getMessage()]
    message = record.getMessage()
    assert message.startswith("shutdown still running after")
    # the whole chain of awaits, down to the event it waits for
    assert "upload-loop: test_tasks.py:" in message
    assert "_waits_forever > locks.py:" in message and " wait > Future" in message
    dump = capfd.readouterr().err  # faulthandler's, of every thread: the blocked worker's too
    assert dump.count("Thread 0x") >= 2 and "threading.py" in dump


async def test_a_stop_that_ends_in_time_reports_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), StallReport("shutdown", 0.3, logging.getLogger("t")):
        await asyncio.sleep(0.01)  # the subject: a stop well inside the 0.3 s
    await asyncio.sleep(0.5)  # past the 0.3 s, when a report left armed would fire
    assert not [r for r in caplog.records if "still running" in r.getMessage()]


async def test_a_loop_on_woken_stops_when_cancelled_just_as_its_event_is_set() -> None:
    """``asyncio.wait_for`` on Python 3.11 returns normally, swallowing the cancellation, when the
    awaited event is set in the same loop iteration; a loop around it then never stops, and a
    node's stop waited on it until it was killed."""
    event = asyncio.Event()
    rounds = 0

    async def waiting_loop() -> None:
        nonlocal rounds
        while True:
            await woken(event, 10)
            rounds += 1

    task = asyncio.create_task(waiting_loop())
    await asyncio.sleep(0.01)  # waiting on the event
    event.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert task in done and task.cancelled(), f"the loop went on ({rounds} rounds) after its cancellation"


async def test_first_of_returns_at_the_first_done_and_cancels_the_other_waits() -> None:
    loop = asyncio.get_running_loop()
    first, other = loop.create_future(), loop.create_future()
    loop.call_later(0.01, first.set_result, None)
    await first_of([first, other], 10)
    assert first.done() and other.cancelled()  # no waiter left behind on what was not needed


async def test_first_of_nothing_to_wait_on_sleeps_the_timeout_out() -> None:
    began = asyncio.get_running_loop().time()
    await first_of([], 0.05)
    assert asyncio.get_running_loop().time() - began >= 0.05


async def test_gather_at_most_keeps_the_limit_and_the_order() -> None:
    running, most = 0, 0

    async def work(value: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)  # the subject: work long enough for calls to overlap unless bounded
        running -= 1
        return value

    results = await gather_at_most(3, [functools.partial(work, v) for v in range(10)])
    assert results == list(range(10))
    assert most == 3


async def test_work_run_to_the_end_goes_on_after_its_caller_is_cancelled_and_logs_its_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tabletopic.tasks")
    ended: list[str] = []
    gate = asyncio.Event()

    @to_the_end
    async def write(outcome: str) -> str:
        await gate.wait()
        ended.append(outcome)
        if outcome == "fails":
            raise OSError("the database went away")
        return outcome

    gate.set()
    assert await write("answered") == "answered"  # uncancelled, it is the work itself
    gate.clear()
    for outcome in ("written", "fails"):
        caller = asyncio.create_task(write(outcome))
        await asyncio.sleep(0)  # the work has begun and waits at the gate
        caller.cancel()  # the connection closed
        with pytest.raises(asyncio.CancelledError):
            await caller
        gate.set()
        await wait_until(lambda outcome=outcome: outcome in ended, message=f"the {outcome} work going on")
        gate.clear()
    await wait_until(lambda: "the database went away" in caplog.text, message="the failure logged")
