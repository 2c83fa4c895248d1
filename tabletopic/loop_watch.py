"""Says when the event loop stalls, and where: a node whose loop is blocked answers nobody (and,
blocked for two leases, gives up its lease), and without this nothing in the log says why.

A thread of its own posts a tick to the loop every ``interval_s``; a tick that has not run after
``threshold_s`` means the loop is held in one callback, or starved of the interpreter lock by the
node's other threads. The thread then samples the loop thread's stack (what it is running now, not
what it awaits) and, once the loop runs again, logs how long it stalled with the innermost frames
of that sample. At most one line in 10 s, which counts the stalls not logged since the last.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

from tabletopic.log_limit import RateLimitedLog

log = logging.getLogger(__name__)
STALL_LOG = RateLimitedLog(log, interval_s=10.0)
FRAMES_SHOWN = 8


class LoopWatch:
    """Reports event-loop stalls longer than ``threshold_s`` (see the module's docstring).

    Start it on the loop's thread (it remembers that thread); :meth:`stop` ends it."""

    def __init__(self, threshold_s: float, interval_s: float = 0.1) -> None:
        self.threshold_s = threshold_s
        self.interval_s = interval_s
        self.worst_s = 0.0  # the longest stall seen, for tests and metrics
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="loop-watch", daemon=True)

    def start(self) -> LoopWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        while not self._done.wait(self.interval_s):
            ran = threading.Event()
            posted = time.monotonic()
            try:
                self._loop.call_soon_threadsafe(ran.set)
            except RuntimeError:  # the loop is closed
                return
            if ran.wait(self.threshold_s):
                continue
            stack = self._loop_stack()
            while not ran.wait(self.interval_s):
                if self._done.is_set():
                    return
            stalled = time.monotonic() - posted
            self.worst_s = max(self.worst_s, stalled)
            STALL_LOG.warning(
                "loop-stall",
                "the event loop was blocked for %.2f s (requests and timers waited); it was running:\n%s",
                stalled,
                stack,
            )

    def _loop_stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "  (the loop's thread has no frame)"
        lines = traceback.format_stack(frame)[-FRAMES_SHOWN:]
        return "".join(lines).rstrip()
