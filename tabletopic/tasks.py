"""Stopping background tasks the same way everywhere."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
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
