"""Rate-limited warnings for what peers do wrong: one bad client (or a port scanner) reconnecting
in a loop must not flood the log, yet no occurrence goes uncounted."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence


def few_of(items: Sequence[str], shown: int = 5) -> str:
    """The first ``shown`` of ``items`` and how many more: ``"a, b, c and 12 more"``. A line about
    a thousand partitions (a broker's failover, a fenced upload) must stay one line a reader can
    take in, in a log as in a client's error message."""
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


class RateLimitedLog:
    """Logs at most one record per ``interval_s`` per key; the next one that gets through says how
    many were held back since the last.

    Args:
        logger: where the records go.
        interval_s: the shortest time between two records of one key.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self, logger: logging.Logger, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._logger = logger
        self._interval = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, key: str, message: str, *args: object) -> bool:
        """Log ``message % args`` at WARNING unless ``key`` logged within the interval (then count
        it). Returns whether it was logged."""
        return self.log(logging.WARNING, key, message, *args)

    def info(self, key: str, message: str, *args: object) -> bool:
        """:meth:`warning` at INFO: for what is expected but worth a line now and then."""
        return self.log(logging.INFO, key, message, *args)

    def error(self, key: str, message: str, *args: object, exc_info: bool = False) -> bool:
        """:meth:`warning` at ERROR: for a failure that repeats while its cause lasts (a full disk,
        an object store that is down), retried every second or two by a loop."""
        return self.log(logging.ERROR, key, message, *args, exc_info=exc_info)

    def log(self, level: int, key: str, message: str, *args: object, exc_info: bool = False) -> bool:
        """Log ``message % args`` at ``level`` unless ``key`` logged within the interval (then
        count it). Returns whether it was logged; ``exc_info`` adds the exception being handled."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            message += " (%d more like it in the last %.0f s not logged)"
            args = (*args, held, now - (last or now))
        self._logger.log(level, message, *args, exc_info=exc_info)
        return True
