"""Waiting for a condition instead of sleeping a fixed time: a test that sleeps and then asserts is
slow when the machine is fast and flaky when it is loaded; one that polls for the condition is
neither."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def wait_until(
    predicate: Callable[[], bool | Awaitable[bool]],
    timeout: float = 10.0,  # noqa: ASYNC109 - a polling deadline with its own message, not a cancel scope
    interval: float = 0.01,
    message: str = "",
) -> None:
    """Poll ``predicate`` (sync or async) every ``interval`` seconds until it is true; raise
    ``TimeoutError`` naming the condition if it is still false after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = predicate()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not true after {timeout}s: {message or getattr(predicate, '__name__', '?')}")
        await asyncio.sleep(interval)


def wait_until_sync(condition: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    """The blocking twin of :func:`wait_until`, for tests that drive real clients from threads or
    processes: poll ``condition`` until it returns something true and return that value. An exception
    from ``condition`` counts as "not yet" (brokers coming and going refuse connections meanwhile) and
    is named in the ``TimeoutError`` if the deadline passes."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:
            last = exc
        if time.monotonic() >= deadline:
            name = getattr(condition, "__name__", "?")
            raise TimeoutError(f"not true after {timeout}s: {name} (last error: {last})")
        time.sleep(interval)
