"""Stopping the helper processes tests start (servers, brokers, nodes) the same way everywhere."""

from __future__ import annotations

import subprocess
from typing import Any


def terminate(process: subprocess.Popen[Any] | None, grace_seconds: float = 15) -> None:
    """SIGTERM ``process`` if it still runs, then SIGKILL it if it has not exited within the grace."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
