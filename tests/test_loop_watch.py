"""The event-loop stall report: a blocked loop is logged with the code that blocked it."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from tabletopic import loop_watch
from tabletopic.loop_watch import LoopWatch


def _blocks_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # the subject: a callback that never yields


def _names_the_blocker(caplog: pytest.LogCaptureFixture) -> bool:
    return any(
        "the event loop was blocked for" in r.getMessage() and "_blocks_the_loop" in r.getMessage()
        for r in caplog.records
    )


async def test_a_stalled_loop_is_logged_with_what_it_was_running(caplog: pytest.LogCaptureFixture) -> None:
    watch = LoopWatch(threshold_s=0.25, interval_s=0.02).start()
    try:
        await asyncio.sleep(0.05)  # the watch takes its first samples of a loop that runs
        loop_watch.STALL_LOG._last.clear()  # a stall before this one must not hold its line back
        with caplog.at_level(logging.WARNING, logger=loop_watch.__name__):
            _blocks_the_loop(1.0)
            for _ in range(100):  # the report comes once the loop runs again
                await asyncio.sleep(0.02)  # the loop runs again, which lets the watch report
                if _names_the_blocker(caplog):
                    break
    finally:
        watch.stop()
    assert watch.worst_s >= 0.75
    assert _names_the_blocker(caplog), [r.getMessage() for r in caplog.records]
