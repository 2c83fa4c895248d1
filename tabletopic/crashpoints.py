"""Crash points for the kill -9 tests: ``TABLETOPIC_CRASH_AT=point[:n]`` makes the process SIGKILL
itself the n-th time (default the first) it passes ``point``; ``TABLETOPIC_PAUSE_AT=point[:n]``
makes it SIGSTOP itself there instead, for a test to let the cluster move on without it and then
SIGCONT it (a broker frozen mid-step, as a long GC pause or a stalled VM freezes one).
``TABLETOPIC_CRASH_ONCE=path`` fires the point in only one of the processes that inherit these
variables (Spark's Python workers, each a process of its own): the first to create ``path``.
Costs one comparison when unset."""

from __future__ import annotations

import os
import signal
import sys

ENV = "TABLETOPIC_CRASH_AT"
PAUSE_ENV = "TABLETOPIC_PAUSE_AT"
ONCE_ENV = "TABLETOPIC_CRASH_ONCE"

_target: str | None = None
_remaining = 0
_signal = signal.SIGKILL


def _load() -> None:
    global _target, _remaining, _signal
    for env, sig in ((ENV, signal.SIGKILL), (PAUSE_ENV, signal.SIGSTOP)):
        spec = os.environ.get(env)
        if spec:
            name, _, count = spec.partition(":")
            _target, _remaining, _signal = name, int(count or 1), sig


_load()


def crash_point(name: str) -> None:
    """SIGKILL (or SIGSTOP) this process here if the environment asks for it (tests only)."""
    global _remaining, _target
    if _target is None or name != _target:
        return
    _remaining -= 1
    if _remaining <= 0:
        _target = None  # a paused process, once continued, passes here again as usual
        if not _first_process():
            return
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), _signal)


def _first_process() -> bool:
    """Whether this process is the one to fire: always without ``TABLETOPIC_CRASH_ONCE``, else only
    the first to create its file."""
    marker = os.environ.get(ONCE_ENV)
    if not marker:
        return True
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True
