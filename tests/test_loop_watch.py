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


async def test_a_stalled_loop_is_logged_with_what_it_was_running(caplog: pytest.LogCaptureFixture) -> None:
    loop_watch.STALL_LOG._last.clear()
    watch = LoopWatch(threshold_s=0.1, interval_s=0.02).start()
    try:
        await asyncio.sleep(0.1)  # a loop that runs is not reported
        assert watch.worst_s < 0.1
        with caplog.at_level(logging.WARNING, logger=loop_watch.__name__):
            _blocks_the_loop(0.4)
            for _ in range(50):  # the report comes once the loop runs again
                await asyncio.sleep(0.02)
                if caplog.records:
                    break
    finally:
        watch.stop()
    assert watch.worst_s >= 0.3
    (record,) = caplog.records
    assert "the event loop was blocked for" in record.getMessage()
    assert "_blocks_the_loop" in record.getMessage()
