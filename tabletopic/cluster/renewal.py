"""Lease renewals on a thread of their own, at a fixed rate.

A broker keeps its place in the cluster by renewing a lease in the metadata database every
heartbeat. Renewed from the event loop, a renewal waits for the loop and for whatever else the loop
is doing: a broker taking over hundreds of partitions, or answering Metadata for them, is busy
there for a second at a time, and a renewal that waited behind a slow one had its next heartbeat
start only after it ended. Under a failover's load (a fault run on two cores: 1,200 partitions,
one broker paused) renewals of healthy brokers so took 2 to 4.7 s, past the 3 s lease; their
shared WALs were taken over and they left the cluster too, one after the other.

Here each lease has a thread that renews it every interval, counted from when the previous
renewal *began*, and reports the outcome to the event loop. It renews only while the loop runs
(``may_renew``): a broker whose loop is stuck serves nobody, and must lose its lease so that its
partitions move.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(eq=False)
class Renewal(Generic[T]):
    """Calls ``renew`` on a thread named ``name`` every ``interval_s`` while ``may_renew()`` and
    hands what it returned, or the exception it raised, to ``report`` on ``loop``.

    ``renew`` and ``may_renew`` run on the renewal's thread, ``report`` on the loop's."""

    name: str
    interval_s: float
    renew: Callable[[], T]
    report: Callable[[T | Exception], None]
    may_renew: Callable[[], bool]
    loop: asyncio.AbstractEventLoop
    _stopped: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    async def stop(self, timeout_s: float) -> None:
        """Renew no more; wait up to ``timeout_s`` for a renewal under way to end (a later
        deregistration must not be overtaken by it)."""
        self._stopped.set()
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join, timeout_s)

    def _run(self) -> None:
        due = time.monotonic() + self.interval_s
        while not self._stopped.wait(max(0.0, due - time.monotonic())):
            due = max(due + self.interval_s, time.monotonic())
            if not self.may_renew():
                continue
            outcome: T | Exception
            try:
                outcome = self.renew()
            except Exception as exc:  # reported: the loop decides what a failure means
                outcome = exc
            if self._stopped.is_set():
                return
            try:
                self.loop.call_soon_threadsafe(self.report, outcome)
            except RuntimeError:  # the loop is closed: the node is gone
                return
