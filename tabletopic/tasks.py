"""Running and stopping background tasks the same way everywhere."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel ``tasks`` (None entries are skipped) and wait until every one has finished.

    The tasks' own cancellations and failures are not raised (they are being stopped), but a
    cancellation of the caller still is: ``gather`` only absorbs its children's exceptions.
    """
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


async def woken(event: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``event`` is set or ``timeout_s`` has passed, then clear it: a polling loop's
    sleep that a wake-up cuts short (a wake-up during the pass that follows is not lost)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout_s)
    event.clear()


async def run_every(
    interval: Callable[[], float],
    one_pass: Callable[[], Awaitable[Any]],
    what: str,
    log: logging.Logger,
) -> None:
    """Run ``one_pass`` after every ``interval()`` seconds (asked before each wait, so a changed
    setting applies from the next one) until cancelled. A pass that fails is logged on ``log`` as
    ``what`` and the next one runs after the next interval: one bad pass never stops the loop."""
    while True:
        await asyncio.sleep(interval())
        try:
            await one_pass()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s pass failed; retrying next interval", what)
