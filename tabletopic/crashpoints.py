"""Crash points for the kill -9 tests: ``TABLETOPIC_CRASH_AT=point[:n]`` makes the process SIGKILL
itself the n-th time (default the first) it passes ``point``. Costs one comparison when unset."""

from __future__ import annotations

import os
import signal
import sys

ENV = "TABLETOPIC_CRASH_AT"

_target: str | None = None
_remaining = 0


def _load() -> None:
    global _target, _remaining
    spec = os.environ.get(ENV)
    if spec:
        name, _, count = spec.partition(":")
        _target, _remaining = name, int(count or 1)


_load()


def crash_point(name: str) -> None:
    """SIGKILL this process here if the environment asks for it (tests only)."""
    global _remaining
    if _target is None or name != _target:
        return
    _remaining -= 1
    if _remaining <= 0:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
